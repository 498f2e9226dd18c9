"""Indexing: placeholder until the full implementation lands."""
from __future__ import annotations


def getitem(input, key):
    raise NotImplementedError("indexing")


def setitem(input, key, value):
    raise NotImplementedError("indexing")


def index_select(input, dim, index):
    raise NotImplementedError("indexing")


def gather(input, dim, index):
    raise NotImplementedError("indexing")
