"""Reading vLLM's accepted `method` values from its source (container/methods.py)."""

from peagle_deploy.container.methods import RECORDED_METHODS, literal_values

SOURCE = '''
from typing import Literal
A = Literal["a1", "a2"]
B: type = Literal["b1", A]
Loop = Literal["x", Loop]
SpeculativeMethod = Literal["eagle3", B, Loop, Unknown]
Other = Literal["standard"]
'''


def test_literal_values_follow_nested_literals_and_ignore_the_rest():
    assert literal_values(SOURCE) == {"eagle3", "b1", "a1", "a2", "x"}
    assert literal_values(SOURCE, "Other") == {"standard"}
    assert literal_values("SpeculativeMethod = str\n") is None
    assert literal_values("x = 1\n") is None


def test_recorded_list_has_what_peagle_deploys_and_not_the_typos():
    assert {"eagle3", "eagle", "ngram", "mtp"} <= RECORDED_METHODS
    assert not {"eagle-3", "p-eagle", "EAGLE3"} & RECORDED_METHODS
