"""The pack-wide :class:`Redaction` redacts every text exactly as a per-reader
:class:`Redactor` does: one compiled pattern and one scan per distinct text serve every sheet."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tenantcost.report.privacy import REDACTED, Redaction, Redactor

ids = st.sampled_from(["acme", "acme-eu", "team-a", "team-a-eu", "b", "x.y", "zeta"])
texts = st.lists(
    st.one_of(ids, st.sampled_from([" ", "-", ".", "corp", "k6", "/", "é", "acmecorp"])),
    max_size=12,
).map("".join)


@given(known=st.lists(ids, max_size=6), me=st.one_of(ids, st.just("")), text=texts)
def test_shared_redaction_equals_the_reader_redactor(known: list[str], me: str, text: str) -> None:
    shared = Redaction(known)
    assert shared.reader(me)(text) == Redactor(known, me=me)(text)
    assert shared.reader(me)(text) == Redactor(known, me=me)(text)  # from the cached scan


def test_reader_keeps_its_own_id_and_redacts_the_others() -> None:
    shared = Redaction(["team-a", "team-a-eu", "acme"])
    redact = shared.reader("team-a-eu")
    assert redact("team-a-eu and team-a, acme-k6, acmecorp") == (
        f"team-a-eu and {REDACTED}, {REDACTED}-k6, acmecorp"
    )
    assert shared.reader("acme")("team-a-eu and acme") == f"{REDACTED} and acme"
