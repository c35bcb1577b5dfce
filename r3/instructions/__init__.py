"""Instruction grammars per suite: parse text into typed instructions and format them back."""
