"""A stdio "server" that reads requests and never answers them (not even `initialize`).

It imports nothing heavy so it starts at once, and exits when its stdin closes, as a well-behaved
stdio server does at shutdown.
"""

import sys

for _line in sys.stdin:
    pass
