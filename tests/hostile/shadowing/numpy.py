print("SHADOWED-numpy")
raise SystemExit("the submitted numpy.py was imported")
