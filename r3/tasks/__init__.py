"""Task specifications, goal phrasings and success / progress checkers per suite."""
