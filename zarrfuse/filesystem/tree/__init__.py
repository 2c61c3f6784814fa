"""Which paths exist: the catalog of arrays and groups, the fanout tree of chunk files, the
namespace of nodes and inodes, metadata documents and source keys.
"""
