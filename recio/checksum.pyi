"""Old import path of :mod:`recio.records.checksum`, removed in recio 0.3.0: for type checkers.

Importing it warns (``recio._moved``); import ``recio.records.checksum`` instead.
"""

from recio.records.checksum import CHECKSUM_MISMATCH as CHECKSUM_MISMATCH
from recio.records.checksum import COVERS_FRAMES as COVERS_FRAMES
from recio.records.checksum import HEADER_SIZE as HEADER_SIZE
from recio.records.checksum import SIDECAR_MAGIC as SIDECAR_MAGIC
from recio.records.checksum import SIDECAR_VERSION as SIDECAR_VERSION
from recio.records.checksum import Checksums as Checksums
from recio.records.checksum import MismatchedPayload as MismatchedPayload
from recio.records.checksum import SidecarWriter as SidecarWriter
from recio.records.checksum import crc32c as crc32c
from recio.records.checksum import crcs_of as crcs_of
from recio.records.checksum import extent_crcs as extent_crcs
from recio.records.checksum import frame_crcs as frame_crcs
from recio.records.checksum import frame_ends as frame_ends
from recio.records.checksum import load_sidecar as load_sidecar
from recio.records.checksum import parse_sidecar as parse_sidecar
from recio.records.checksum import record_crcs as record_crcs
from recio.records.checksum import resolve_verify as resolve_verify
from recio.records.checksum import sidecar_bytes as sidecar_bytes
from recio.records.checksum import sidecar_path as sidecar_path
from recio.records.checksum import write_sidecar as write_sidecar
