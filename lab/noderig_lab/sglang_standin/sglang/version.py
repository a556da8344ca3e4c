__version__ = "0.5.9.post2+ddtree.standin"
