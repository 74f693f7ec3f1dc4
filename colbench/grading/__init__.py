"""Sandboxed grading of model-written code. See grader.py for the trusted side."""
