"""The ``watch:`` and ``alerts:`` sections of the store's settings file.

``tenantcost watch`` scores each client's daily cost per source against its trailing median
(:mod:`tenantcost.watch`); ``watch --notify`` sends what it finds to the destinations the
``alerts:`` section names (:mod:`tenantcost.alerts`). Both live in the settings file, not the
rule file: they say who is told and how sensitive the watch is, not how money is split, so
changing them never changes a figure and needs no new rule version.

```yaml
watch:
  window_days: 14       # trailing days of the baseline (may reach into the previous month)
  min_days: 7           # fewest baseline days (under the same split) before a day is scored
  threshold: 4          # |score| at or above which a day is flagged
  min_amount: "0.01"    # currency units: smaller moves are never flagged (and floor the scale)
alerts:
  destinations:
    am-alice: {webhook: "https://hooks.example.com/tc", secret_env: TC_ALICE_SECRET}
    am-bob: {email: ["bob@example.com"]}
    finance: {webhook: "https://hooks.example.com/fin", secret_env: TC_FIN_SECRET}
  smtp: {host: smtp.example.com, port: 587, sender: tenantcost@example.com, starttls: true,
         username_env: TC_SMTP_USER, password_env: TC_SMTP_PASSWORD}
  routes:
    - {column: account_manager, value: Alice, to: [am-alice]}   # by a catalog column
    - {clients: [client-b, client-c], to: [am-bob]}             # by client list
  catch_all: [finance]   # receives every alert; nobody does unless configured
  notify_below: false    # also alert when a client's projection enters "below"
  timeout: 10            # seconds per try: a webhook's whole exchange, an SMTP operation
```

Secrets (the webhook's HMAC key, SMTP credentials) are named by environment variable, never
written in the file.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from pydantic import Field, field_validator, model_validator

from tenantcost.config.base import Strict


class WatchSettings(Strict):
    """The anomaly method's parameters (docs/watch.md gives the method and a worked example)."""

    window_days: int = Field(default=14, ge=1, le=366)
    """Trailing complete UTC days whose median is a day's baseline."""
    min_days: int = Field(default=7, ge=1, le=366)
    """Fewest baseline days, under the same split of the source, before a day is scored."""
    threshold: float = Field(default=4.0, gt=0, allow_inf_nan=False)
    """A day is flagged when |score| is at least this."""
    min_amount: str = "0.01"
    """Currency units, an exact decimal: a day is flagged only if it moved at least this far
    from its baseline; also the scale's floor."""

    @field_validator("min_amount", mode="before")
    @classmethod
    def _decimal(cls, value: object) -> str:
        text = str(value).strip()
        try:
            amount = Decimal(text)
        except InvalidOperation:
            raise ValueError(f"not a decimal amount: '{value}'") from None
        if not amount.is_finite() or amount < 0:
            raise ValueError(f"must be a finite amount >= 0, got '{value}'")
        return text

    @model_validator(mode="after")
    def _window(self) -> WatchSettings:
        if self.min_days > self.window_days:
            raise ValueError(
                f"min_days ({self.min_days}) cannot exceed window_days ({self.window_days})"
            )
        return self


class Destination(Strict):
    """Where alerts go: a webhook (JSON POST signed with HMAC-SHA256) and/or e-mail."""

    webhook: str | None = Field(default=None, pattern=r"^https?://")
    secret_env: str | None = Field(default=None, min_length=1)
    """The environment variable holding the webhook's HMAC key (required with ``webhook``)."""
    email: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _something(self) -> Destination:
        if self.webhook is None and not self.email:
            raise ValueError("a destination needs a webhook or an email list")
        if self.webhook is not None and self.secret_env is None:
            raise ValueError("a webhook needs secret_env (the variable holding its HMAC key)")
        return self


class SmtpSettings(Strict):
    """The SMTP server e-mail destinations go through."""

    host: str = Field(min_length=1)
    port: int = Field(default=25, ge=1, le=65535)
    sender: str = Field(min_length=3)
    starttls: bool = False
    username_env: str | None = None
    password_env: str | None = None


class Route(Strict):
    """The clients whose alerts go to ``to``: a client list, or a catalog column's value."""

    to: list[str] = Field(min_length=1)
    clients: list[str] | None = None
    column: str | None = None
    value: str | None = None

    @model_validator(mode="after")
    def _one_match(self) -> Route:
        by_column = self.column is not None or self.value is not None
        if (self.clients is not None) == by_column:
            raise ValueError("a route matches by `clients`, or by `column` and `value`")
        if by_column and (self.column is None or self.value is None):
            raise ValueError("a route by catalog column needs both `column` and `value`")
        return self


class AlertSettings(Strict):
    """Destinations, how clients' alerts reach them, and what triggers a status alert."""

    destinations: dict[str, Destination] = Field(default_factory=dict)
    smtp: SmtpSettings | None = None
    routes: list[Route] = Field(default_factory=list)
    catch_all: list[str] = Field(default_factory=list)
    """Destinations that receive every alert (none unless configured)."""
    notify_below: bool = False
    timeout: float = Field(default=10.0, gt=0, le=120, allow_inf_nan=False)
    """Seconds one try may take: a webhook's whole exchange (connect, request, status,
    headers, body), or each operation with the SMTP server. At most 120: a delivery's tries
    then end well within the 15 minutes after which its claim is taken over
    (:data:`tenantcost.store.alert_deliveries.STALE_CLAIM`)."""

    @model_validator(mode="after")
    def _known_destinations(self) -> AlertSettings:
        named = [*self.catch_all, *(name for route in self.routes for name in route.to)]
        unknown = sorted({name for name in named if name not in self.destinations})
        if unknown:
            raise ValueError(f"unknown destination(s): {', '.join(unknown)}")
        if self.smtp is None and any(d.email for d in self.destinations.values()):
            raise ValueError("e-mail destinations need an `smtp:` section")
        return self
