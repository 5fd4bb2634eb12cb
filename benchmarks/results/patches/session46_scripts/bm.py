import sys
from cutefi.bench.cli import main
sys.exit(main(sys.argv[1:]))
