"""Answer guards: schemas an answer must validate against (schema), rules and judges (rules), and quotes
checked against the inputs (quotes).
"""

__all__: list[str] = []
