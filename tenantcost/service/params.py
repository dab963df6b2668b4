"""Query parameters the API and the pages share, bounded where they enter.

* ``page``: at most :data:`MAX_PAGE`. ``?page=99999999999999999999`` reached SQLite as an
  ``OFFSET`` past its 64-bit integers (a 500); no search has a millionth page.
* ``plan``, ``segment``, ``manager`` (the client list's filters): a catalog value, so what no
  stored text may hold (a control character, a lone surrogate) is a 422 naming the filter;
* ``currency`` (a client's pages): an ISO 4217 code in force, else a 422;
* ``q`` (the client search): part of a client id, so a character no client id may hold (a
  control character such as NUL, which PostgreSQL refuses in a query) is a 422 naming ``q``
  rather than a search that can match nothing.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Query
from pydantic import AfterValidator

from tenantcost.client_id import client_id_problem
from tenantcost.stored_text import text_problem

MAX_PAGE = 1_000_000
"""The last page number a paged list accepts."""
MAX_SEARCH = 200
"""Characters of a client search at most."""


def _search_text(q: str) -> str:
    problem = client_id_problem(q)
    if problem is not None:
        raise ValueError(f"q: no client can match: {problem.removeprefix('client id ')}")
    return q


SearchText = Annotated[
    str,
    Query(max_length=MAX_SEARCH, description="Part of the id, any case."),
    AfterValidator(_search_text),
]
PageNumber = Annotated[int, Query(ge=1, le=MAX_PAGE)]


def _catalog_value(value: str) -> str:
    problem = text_problem(value, "the value")
    if problem is not None:
        raise ValueError(f"no catalog value can match: {problem}")
    return value


CatalogValue = Annotated[
    str,
    Query(max_length=MAX_SEARCH, description="A catalog value, exactly (plan, segment, manager)."),
    AfterValidator(_catalog_value),
]
"""``?plan=``, ``?segment=``, ``?manager=`` of the client list."""


def _currency_code(value: str) -> str:
    from tenantcost.currency import is_currency

    code = value.strip().upper()
    if not is_currency(code):
        raise ValueError("currency: not an ISO 4217 code in force, such as EUR, GBP or JPY")
    return code


CurrencyCode = Annotated[
    str,
    Query(max_length=8, description="An ISO 4217 code: show the figures converted into it."),
    AfterValidator(_currency_code),
]
"""``?currency=`` of a client's pages (docs/currency.md): an unknown code is a 422."""
