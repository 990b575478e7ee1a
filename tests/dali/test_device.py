"""Finding DALI and the GPU: one clear message where the GPU is missing."""

import pytest

from recio import dali

from ..conftest import needs_dali


@needs_dali
def test_gpu_request_without_gpu_is_one_clear_message():
    if dali.gpu_count() > 0:
        pytest.skip("this machine has a GPU")
    with pytest.raises(dali.DeviceUnavailableError, match="device='cpu'") as info:
        dali.resolve_device("gpu")
    assert "libcuda" in str(info.value) and "pip install -e '.[dali]'" in str(info.value)
    assert dali.resolve_device("auto") == "cpu"
