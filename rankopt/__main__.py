"""``python -m rankopt`` (also used by ``torchrun -m rankopt``)."""

import sys

from rankopt.cli import main

if __name__ == "__main__":
    sys.exit(main())
