"""One process of test_many_writers.py: writes units into a dataset that other processes write
to at the same time.

    python writer_job.py URI STORAGE_JSON MARKER START_AT UNITS_JSON

Every unit gets ENTRIES entries whose tensors are all MARKER, so that a reader can tell whose
rows a unit holds. The process waits until START_AT (a time.time() value) so that all of them
commit at once."""

import json
import sys
import time

import probelake
import torch

ENTRIES = 5


def main() -> None:
    uri, storage, marker, start_at, units = sys.argv[1:6]
    lake = probelake.open(uri, storage_options=json.loads(storage) or None)
    units = json.loads(units)
    while time.time() < float(start_at):
        time.sleep(0.001)
    for step, stage, rank in units:
        with lake.unit(step, stage, rank) as u:
            for i in range(ENTRIES):
                u.record(
                    f"Functional.linear.{i}.forward",
                    output=[torch.full((16,), float(marker))],
                )


if __name__ == "__main__":
    main()
