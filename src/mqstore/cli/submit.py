"""Entry script for ``spark-submit``: the ``mqstore spark`` commands on any cluster manager.

    spark-submit --master yarn [--conf ...] "$(python -m mqstore.cli.submit --print-path)" \\
        rebuild-index rocketmq /shared/store --out /shared/rebuilt

runs ``mqstore spark rebuild-index rocketmq ...`` in the driver that ``spark-submit`` started,
with the master and configuration it was given (the commands' ``--master`` default yields to
``spark-submit`` there).  Every executor must be able to import ``mqstore``: install it on the
nodes (``--conf spark.pyspark.python=/path/to/that/python``), ship a packed environment
(``mqstore spark pack-env mqstore-env.tar.gz``, then ``--archives mqstore-env.tar.gz#environment
--conf spark.pyspark.python=./environment/bin/python``), or ship only mqstore with ``--py-files``
(a zip with ``mqstore/`` at its root; numpy, numba, pyarrow, pandas, crc32c, isal, lz4, cramjam,
zstandard, click, rich and matplotlib installed on the nodes).  See docs/spark.md, "Running on a
cluster".
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    """Run one ``mqstore spark`` command with ``argv`` (default: the script's arguments)."""
    from mqstore.cli.spark import group

    group.main(args=list(sys.argv[1:] if argv is None else argv), prog_name="mqstore spark")


if __name__ == "__main__":
    if sys.argv[1:] == ["--print-path"]:
        print(__file__)
    else:
        main()
