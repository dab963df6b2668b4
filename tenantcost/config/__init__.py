"""The rule file's models: one strict base (``base``), the rules and their versions
(``rules``), live sources (``sources``), confidence thresholds (``confidence``) and the
node-price cost model (``cost_model``)."""
