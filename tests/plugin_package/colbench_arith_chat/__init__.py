"""A second plugin package for colbench, the one docs/plugins.md walks through: a task family graded by hidden tests
in colbench's sandbox (arith-chat: the person holds a number; the answer is a function solve that uses it) and an
engine that plays it. Its entry points are in the dist-info folder beside it, as pip writes them on install."""
