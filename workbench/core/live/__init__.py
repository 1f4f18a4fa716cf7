"""The live loop: watching kernel.py and what it imports (watch), turning each save into a run that
cancels the one in flight (loop), and what changed since the runs before (changes). The top layer
of core: may import every other.
"""
