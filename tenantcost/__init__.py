"""tenantcost: what each client of a multi-tenant SaaS costs to run on Kubernetes.

The package is a functional core with an imperative shell:

* ``tenantcost.readers`` turn each source into the canonical tables of ``tenantcost.tables``;
* ``tenantcost.config.rules`` loads and validates the dated allocation rule file;
* ``tenantcost.allocate`` runs the core, tables + rules -> ``tenantcost.result``: ``plan``
  (costs and rules -> pools), ``engine`` (time chunks split over usage, then folded);
  the vocabularies (classes, line kinds, causes) are in ``tenantcost.kinds``;
* ``tenantcost.reconcile`` proves the cascade closes to the unit;
* ``tenantcost.writers`` render results; ``tenantcost.cli`` is the thin command line.
"""

__version__ = "0.1.0"
