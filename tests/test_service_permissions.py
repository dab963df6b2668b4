"""The permission module alone: the full role × action table written out here from the access
rules (not derived from the module under test), and properties over any client ids
(hypothesis)."""

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
    Role.ACCOUNT_MANAGER: {A.LIST_MONTHS, A.LIST_CLIENTS, A.VIEW_CLIENT,
                           A.VIEW_MOVERS},  # movers among its own clients only
    Role.PRODUCT: {A.LIST_MONTHS, A.LIST_CLIENTS, A.VIEW_CLIENT, A.VIEW_ISSUED_MONTH,
                   A.VIEW_PRICING,  # issued figures, their cascade, pricing
                   A.VIEW_WATCH,  # every client's month-to-date watch
                   A.VIEW_MOVERS},  # a month's top movers (issued months)
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


def test_finance_and_admin_may_do_everything_product_may() -> None:
    for role in (Role.FINANCE, Role.ADMIN):
        assert TABLE[Role.PRODUCT] <= TABLE[role]
    assert {A.VIEW_PRICING, A.VIEW_ISSUED_MONTH} <= TABLE[Role.PRODUCT]
    never = {A.VIEW_DRAFTS, A.VIEW_CLUSTER, A.VIEW_INVOICE, A.CLOSE_MONTH, A.REOPEN_MONTH,
             A.INGEST_USAGE, A.MANAGE_TOKENS, A.LIST_BATCHES, A.WITHDRAW_BATCH,
             A.VIEW_INTERNAL_SHEET}  # fmt: skip
    assert not never & TABLE[Role.PRODUCT]
    assert never | TABLE[Role.PRODUCT] == set(Action)  # every action decided for product


@given(st.text(min_size=1, max_size=30))
def test_product_sees_every_client_but_never_a_draft_or_an_internal_reason(client: str) -> None:
    from tenantcost.service.permissions import sees_internal_reasons

    product = principal(Role.PRODUCT)
    assert can(product, A.VIEW_CLIENT, client) is Decision.ALLOW
    assert can(product, A.VIEW_DRAFTS, client) is Decision.FORBIDDEN
    assert not sees_drafts(product) and not sees_internal_reasons(product)
    assert client_scope(product) is None


def test_product_opens_the_month_pages_without_finances_workings() -> None:
    from tenantcost.service.permissions import sees_month_workings

    pages = {role for role in Role if can(principal(role), A.VIEW_ISSUED_MONTH).allowed}
    assert pages == {Role.ADMIN, Role.FINANCE, Role.PRODUCT}  # /months, /months/{M}
    workings = {role for role in Role if sees_month_workings(principal(role))}
    assert workings == {Role.ADMIN, Role.FINANCE}  # drafts, forms, batches, usage, summaries


def test_the_demo_words_every_action_as_a_person_reads_it() -> None:
    from tenantcost.service.demo import ACTION_TEXT, may_do

    assert set(ACTION_TEXT) == {action.value for action in Action}
    for role in (Role.ADMIN, Role.FINANCE, Role.PRODUCT, Role.ACCOUNT_MANAGER):
        said = may_do(role.value)
        assert not [a.value for a in Action if a.value in said], said  # no internal name
    assert "see every client's month to date" in may_do(Role.PRODUCT.value)
