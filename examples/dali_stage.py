"""Train-loop shape with the DALI stage: recio reads and shards, DALI decodes and augments.

    python examples/dali_stage.py DATA.rec [--device auto|gpu|cpu]

On a GPU machine batches arrive as torch tensors on the GPU (nvJPEG decode); without one the
same graph runs as a DALI CPU pipeline and batches are numpy arrays.
"""

import argparse

from recio.dali import DALIImageRecordIter


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("rec")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--batches", type=int, default=5)
    args = parser.parse_args()

    it = DALIImageRecordIter(
        args.rec,
        data_shape=(3, 224, 224),
        batch_size=32,
        shuffle=True,
        seed=0,
        random_resized_crop=True,
        rand_mirror=True,
        mean_r=123.7, mean_g=116.3, mean_b=103.5,
        std_r=58.4, std_g=57.1, std_b=57.4,
        device=args.device,  # "gpu" without a GPU raises one clear DeviceUnavailableError
    )  # fmt: skip
    with it:
        for i, batch in enumerate(it):
            print(f"step {batch.step}: data {tuple(batch.data.shape)} ids {batch.index[:4]}...")
            if i + 1 == args.batches:
                break
        state = it.state_dict()  # save with the model checkpoint
    print("resume from", state, "| bad records so far:", it.stats.bad_records)


if __name__ == "__main__":
    main()
