"""``python -m tenantcost`` runs the command line."""

from tenantcost.cli import main

main()
