"""Read a .rec straight from S3 or an S3-compatible store (MinIO, SeaweedFS, Ceph).

    python examples/read_s3.py s3://bucket/train.rec \\
        --endpoint-url http://127.0.0.1:8333 --key testing --secret testing

``storage_options`` go to fsspec/s3fs unchanged (the s3 extra:
``pip install -e '.[s3]'`` in a checkout).
Without --key/--secret, s3fs finds credentials the usual way (environment,
~/.aws, instance role). The .idx beside the .rec tells the iterator where each
record lies, so it fetches records by byte ranges, coalesced and read ahead.
"""

from __future__ import annotations

import argparse
import time

from recio import ImageRecordIter


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="s3://bucket/path/data.rec (the .idx beside it)")
    parser.add_argument("--endpoint-url", help="for S3-compatible stores")
    parser.add_argument("--key")
    parser.add_argument("--secret")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--image-size", type=int, default=32)
    args = parser.parse_args(argv)

    storage_options: dict = {}
    if args.key:
        storage_options.update(key=args.key, secret=args.secret)
    if args.endpoint_url:
        storage_options["client_kwargs"] = {"endpoint_url": args.endpoint_url}

    start = time.perf_counter()
    images = 0
    with ImageRecordIter(
        path_imgrec=args.url,
        data_shape=(3, args.image_size, args.image_size),
        batch_size=args.batch_size,
        shuffle=True,
        resize=args.image_size,
        storage_options=storage_options,
    ) as data:
        for batch in data:
            images += len(batch.label) - batch.pad
    elapsed = time.perf_counter() - start
    print(f"read {images} images from {args.url} in {elapsed:.2f}s ({images / elapsed:.0f}/s)")
    return images


if __name__ == "__main__":
    main()
