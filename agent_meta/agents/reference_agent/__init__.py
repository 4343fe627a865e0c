"""The reference agent behind ``agent-meta agent``: every prompt line drives the owner.

=================================  =========================================================
prompt line                        effect
=================================  =========================================================
``/meta set KEY JSON``             publish ``{"_meta": {KEY: JSON}}``
``/meta rm KEY``                   publish ``{"_meta": {KEY: null}}``
``/meta patch JSON_OBJECT``        publish that object as the ``_meta`` patch, nulls included
``/meta clear``                    publish ``{"_meta": null}``
``/title TEXT`` / ``/title``       publish ``title`` (no text: ``null``)
``/domain set KEY PATH JSON``      domain patch inside top-level KEY at dotted PATH
``/domain rm KEY PATH``            remove at dotted PATH inside top-level KEY
``/fail ID REVISION [TITLE]``      report a failure incident
``/resolve ID REVISION``           resolve it (clears only when id and revision match)
``/burst N KEY``                   background task publishing ``{KEY: 1}`` .. ``{KEY: N}``
``/ask TEXT``                      ``session/request_permission`` (allow / reject); waits
``/trace T KEY JSON``              ``{KEY: JSON}`` with ``params._meta = {"traceparent": T}``
anything else                      echoed back as an agent message
=================================  =========================================================
"""

__all__: list[str] = []  # an application: its modules are private
