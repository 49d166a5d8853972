print("SHADOWED-json")
raise SystemExit("the submitted json.py was imported")
