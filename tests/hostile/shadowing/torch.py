print("SHADOWED-torch")
raise SystemExit("the submitted torch.py was imported")
