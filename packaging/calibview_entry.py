"""The bundle's executable: the window with no arguments or files, every CLI command otherwise (calibview.cli.program.main
dispatches, exactly as the installed ``calibview`` script does)."""

import sys

from calibview.cli import main

if __name__ == "__main__":
    sys.exit(main())
