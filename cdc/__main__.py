import sys

from cdc.cli.decode import main

sys.exit(main())
