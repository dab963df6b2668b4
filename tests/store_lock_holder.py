"""Hold the store's write lock from another process (tests/test_store_lock.py).

    python tests/store_lock_holder.py DB_URL

Takes the lock, prints ``locked``, holds it until a line arrives on stdin (or stdin closes),
then releases it and exits 0.
"""

from __future__ import annotations

import sys

from tenantcost.store.engine import open_engine
from tenantcost.store.lock import write_transaction
from tenantcost.store.settings import resolve_settings


def main() -> None:
    engine = open_engine(resolve_settings(db=sys.argv[1], environ={}))
    with write_transaction(engine, wait=30):
        print("locked", flush=True)
        sys.stdin.readline()
    engine.dispose()


if __name__ == "__main__":
    main()
