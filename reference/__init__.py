"""Instructor reference head for Project Step 4, plus its bug library (chaffs) and correct variants."""
