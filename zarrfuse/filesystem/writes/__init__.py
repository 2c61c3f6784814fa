"""How writes become chunks: open writers and commits, write buffers, scratch files and
metadata documents written back.
"""
