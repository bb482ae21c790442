import sys

from climnb.cli import main

sys.exit(main())
