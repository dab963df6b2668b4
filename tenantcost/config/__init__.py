"""The rule file's models: one strict base (``base``), the rules and their versions
(``rules``), live sources (``sources``), confidence thresholds (``confidence``) and the
node-price cost model (``cost_model``); the built-in defaults they fall back on, read from
``defaults.yaml`` (``defaults``); the rule file's JSON Schema (``schema``)."""
