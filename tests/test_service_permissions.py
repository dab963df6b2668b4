"""The permission module alone: the full role × action table written out from issue 10, and
properties over any client ids (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tenantcost.service.permissions import (
    Action,
    Decision,
    Principal,
    Role,
    can,
    client_scope,
    sees_drafts,
)

A = Action
TABLE: dict[Role, set[Action]] = {
    Role.ADMIN: set(Action),
    Role.FINANCE: set(Action) - {A.MANAGE_TOKENS},
    Role.ACCOUNT_MANAGER: {A.LIST_MONTHS, A.LIST_CLIENTS, A.VIEW_CLIENT},
    Role.PRODUCT: set(),  # scaffold: the product part fills this in
    Role.INGEST: {A.INGEST_USAGE},
}
MINE = frozenset({"acme", "globex"})


def principal(role: Role) -> Principal:
    return Principal(f"t-{role}", role, MINE if role is Role.ACCOUNT_MANAGER else frozenset())


@pytest.mark.parametrize("role", list(Role))
@pytest.mark.parametrize("action", list(Action))
def test_the_role_table(role: Role, action: Action) -> None:
    allowed = action in TABLE[role]
    assert can(principal(role), action, "acme") is (
        Decision.ALLOW if allowed else Decision.FORBIDDEN
    )
    assert can(None, action, "acme") is Decision.UNAUTHENTICATED


@given(st.text(min_size=1, max_size=30), st.sampled_from(list(Action)))
def test_an_account_manager_gets_the_same_answer_for_any_client_not_its_own(
    client: str, action: Action
) -> None:
    manager = principal(Role.ACCOUNT_MANAGER)
    decision = can(manager, action, client)
    if client in MINE:
        return
    if action in (A.VIEW_CLIENT, A.VIEW_DRAFTS):
        assert decision is Decision.NOT_FOUND  # the answer for a client that does not exist
    else:
        assert decision is can(manager, action, None)


@given(st.text(min_size=1, max_size=30))
def test_only_finance_and_admin_see_drafts_and_every_client(client: str) -> None:
    for role in Role:
        who = principal(role)
        cluster = role in (Role.ADMIN, Role.FINANCE)
        assert sees_drafts(who) is cluster
        assert (client_scope(who) is None) is (role is not Role.ACCOUNT_MANAGER)
        if cluster:
            assert can(who, A.VIEW_CLIENT, client) is Decision.ALLOW
