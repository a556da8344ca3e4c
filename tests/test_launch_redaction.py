"""The launcher's redactor, case by case (the property over random splits is in
test_unit_render.py): every form a secret takes in the server's output, what it holds back and
for how long. Expected bytes are written out here, never taken from the redactor."""

from __future__ import annotations

from noderig.node.launch import MAX_PENDING, Redactor

# A secret whose three forms differ: raw (UTF-8 bytes), repr-escaped and JSON-escaped.
SECRET = "sk-é'\"\\z"
RAW = SECRET.encode()                     # b'sk-\xc3\xa9\'"\\z'
REPR = "sk-é\\'\"\\\\z".encode()        # repr(SECRET)[1:-1]: é stays, ' and \ escaped (" is not)
JSON = b'sk-\\u00e9\'\\"\\\\z'            # json.dumps(SECRET)[1:-1]


def whole(redactor: Redactor, *chunks: bytes) -> bytes:
    return b"".join(redactor.feed(c) for c in chunks) + redactor.flush()


def test_the_three_forms_are_each_masked_whole():
    assert len({RAW, REPR, JSON}) == 3
    for form in (RAW, REPR, JSON):
        assert whole(Redactor([SECRET]), b"key=" + form + b" end\n") == b"key=*** end\n", form


def test_a_secret_that_is_not_valid_unicode_is_masked_as_its_bytes():
    # an environment variable read with surrogateescape: byte 0xff
    secret = "sk-tok\udcffen"
    assert whole(Redactor([secret]), b"a sk-tok\xffen b\n") == b"a *** b\n"


def test_the_longest_form_wins_where_a_shorter_one_is_its_prefix():
    secret = "tok\\en"                    # raw b"tok\\en"; repr/JSON b"tok\\\\en"
    assert whole(Redactor([secret]), b"x tok\\\\en y\n") == b"x *** y\n"
    secret = "tok\\"                      # raw b"tok\\" is a prefix of the escaped b"tok\\\\"
    assert whole(Redactor([secret]), b"x tok\\\\ y\n") == b"x *** y\n"


def test_no_secret_passes_everything_through_untouched():
    r = Redactor([])
    assert r.feed(b"abc") == b"abc" and r.feed(b"\n") == b"\n" and r.flush() == b""
    r = Redactor([""])                    # an empty value is no secret
    assert whole(r, b"a\n") == b"a\n"


def test_complete_lines_go_out_at_once_and_the_rest_waits():
    r = Redactor(["sk-secret1"])
    assert r.feed(b"a\nb\nc") == b"a\nb\n"
    assert r.feed(b"d\re") == b"cd\r"
    assert r.flush() == b"e"
    assert r.feed(b"f\n") == b"f\n"       # nothing left over from before the flush
    assert r.feed(b"g\rh\ri") == b"g\rh\r"  # up to the last line end of either kind
    assert r.flush() == b"i"


def test_a_line_longer_than_the_limit_is_cut_holding_back_only_a_possible_secret_start():
    r = Redactor(["sk-secret1"])          # 10 bytes: at most 9 held back
    assert r.feed(b"x" * MAX_PENDING) == b""                     # at the limit: still waiting
    assert r.feed(b"x" * 10) == b"x" * (MAX_PENDING + 1)         # past it: all but 9 bytes
    assert r.flush() == b"x" * 9


def test_a_line_just_under_the_limit_after_a_newline_waits():
    r = Redactor(["sk-secret1"])
    assert r.feed(b"y" * (MAX_PENDING - 5) + b"\n" + b"z" * 10) == b"y" * (MAX_PENDING - 5) + b"\n"
    assert r.flush() == b"z" * 10


def test_a_secret_across_the_cut_of_a_long_line_is_masked_whole():
    r = Redactor(["sk-secret1"])
    out = r.feed(b"x" * (MAX_PENDING + 10) + b"sk-secret1" + b"yy")
    assert out == b"x" * (MAX_PENDING + 10) + b"***"
    assert r.flush() == b"yy"


def test_a_shorter_form_at_the_cut_waits_for_the_longer_form_it_may_begin():
    # raw b"tok\\" (4 bytes) ends the long line; the next read makes it the escaped form
    r = Redactor(["tok\\"])
    first = r.feed(b"x" * (MAX_PENDING + 10) + b"tok\\")
    assert first == b"x" * (MAX_PENDING + 10)
    assert r.feed(b"\\\n") == b"***\n"
    assert r.flush() == b""
