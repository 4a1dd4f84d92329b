"""Tables, templates and ontologies: the organisation's data, document forms and object model
that agents work with (issue 19; DESIGN.md 8: beside sandbox/).

Each kind is a resource (domain/resources.py ``KINDS``) with data of its own, and gives the
agents that list it tools (domain/knowledge.py ``KnowledgeTool``): ``KINDS`` in
services/knowledge_kinds.py says which, and which operation performs each call.
"""
