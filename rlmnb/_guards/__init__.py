"""Answer guards: schemas an answer must validate against, and quotes checked against the inputs.
"""
