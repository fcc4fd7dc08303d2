import os
import sys
import pathlib

os.environ.setdefault("MPLBACKEND", "Agg")
# Make `from reference import ...` work from every test module.
sys.path.insert(0, str(pathlib.Path(__file__).parent))
