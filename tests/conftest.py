import pathlib
import sys

# Make `from reference import ...` work from every test module.
sys.path.insert(0, str(pathlib.Path(__file__).parent))
