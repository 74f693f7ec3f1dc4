"""Canonical text for values returned by graded code.

The grader never calls `==` on objects made by untrusted code. Instead the sandbox turns
each output into a canonical string, and the trusted parent compares the strings with the
rules of Python's `==` (compare.py). The reference and the answer run in different
sandboxes, so nothing could compare the objects themselves: the text carries all that `==`
needs.

- Numbers carry their exact value, whatever their type (bool, int, float, complex, Decimal,
  Fraction, numpy scalars), as `==` compares them: an integer value reads as its digits
  (1, 1.0, True, Decimal('1.00') all read "1"; -0.0 reads "0"), a value that is exactly a
  double reads as that double's repr ("0.5" for 0.5, Decimal('0.5') and Fraction(1, 2)),
  any other rational as "p/q" in lowest terms (Decimal('0.1') reads "1/10", which is not
  the double 0.1, as under `==`), complex as "complex(re, im)" unless im is 0. A numpy
  scalar is wrapped ("np.int64(6)"): against a sequence it acts as an array does.
- dict, set and frozenset contents are sorted, so order does not matter, and a set
  equals a frozenset (and a dict's keys view) with the same elements, as in Python;
  OrderedDict keeps its order, Counter, deque and a dict's items view are tagged:
  compare.py applies their rules.
- a tuple is not a list; str is not bytes; bytes equals bytearray; range reads as its
  normal form ("range(0, 3)" for range(3)), equal only to a range.
- a numpy array of one element reads "array([[x]])" (its element, nested as deep as its
  dimensions); any other array can never compare true (its truth value raises), so it is
  never equal.
- date, datetime, time and timedelta (pandas Timestamp and Timedelta among them) read as
  their value: a naive datetime as its fields, an aware one as its instant in UTC.
- a subclass of any of these types (namedtuple, defaultdict, IntEnum, a subclass of int
  or list written by the answer) is read through that base, which is what `==` does when
  the subclass does not override it. Its own methods are never asked, so an `__eq__` that
  always says True buys nothing: only the content counts.

Objects that exist once per interpreter compare by identity under `==`, and the official
grader runs the reference and the answer in one interpreter, so they are equal there:
- builtins such as the type `int`, the function `len`, `Ellipsis` read "<builtin name>";
- math.nan, numpy.nan, pandas.NaT and pandas.NA inside a container read as their names
  (containers compare items by identity first, so `[math.nan] == [math.nan]`); at the top
  level each is unequal to everything, itself included.

Never equal to anything, as fresh objects are under `==`:
- any other NaN (nan != nan), anywhere inside the value;
- any other object: it is shown as `<opaque module.Name>`, tagged by its exact type.
`encode` reports these by returning comparable=False.

This file runs inside the sandbox too (sent as source, ahead of runner.py), so it must
import nothing heavy: `import json` alone costs half of a worker's start-up (builtins, sys
and math are built into the interpreter). Library types (decimal, fractions, collections,
datetime, numpy, pandas) are recognised only when their module is already in sys.modules:
a value of such a type means its module was imported. What it captures at import time was
taken before any graded code ran. It must not look at values through their own methods,
so a type is known by its place in the real MRO, and content is read with the unbound
methods and descriptors of the builtin or library base, never of the value's own class.
"""

import builtins as _builtins_module
import sys as _sys
from math import gcd as _gcd
from math import nan as _MATH_NAN

# name -> object of every public builtin but the constants handled by value.
_BUILTINS = {
    name: value
    for name, value in _builtins_module.__dict__.items()
    if not name.startswith("_") and value is not None and type(value) is not bool
}
_BUILTIN_NAME = {id(value): name for name, value in _BUILTINS.items()}

_BUILTIN_KINDS = {id(kind): kind for kind in (int, float, complex, str, bytes, bytearray, tuple, list, dict, set,
                                              frozenset, range, type({}.keys()), type({}.items()))}
_BUILTIN_KINDS[id(bool)] = int
_KEYS_VIEW, _ITEMS_VIEW = type({}.keys()), type({}.items())
_MODULES = _sys.modules  # the interpreter's own dict, even if graded code rebinds sys.modules
_MODULE_TYPE = type(_sys)
_MODULE_DICT = _MODULE_TYPE.__dict__["__dict__"].__get__
_MRO = type.__dict__["__mro__"].__get__
_INF = float("inf")
_EPOCH = 719163  # date(1970, 1, 1).toordinal()
_NS_PER_DAY = 86400 * 10**9
# Library types by module: (attribute, kind). A subclass is read through the first of
# these (or of the builtins above) in its MRO.
_LIBRARY_TYPES = {
    "decimal": (("Decimal", "decimal"),),
    "fractions": (("Fraction", "fraction"),),
    "collections": (("OrderedDict", "ordered"), ("Counter", "counter"), ("deque", "deque")),
    "datetime": (("datetime", "datetime"), ("date", "date"), ("time", "time"), ("timedelta", "timedelta"),
                 ("timezone", "-timezone")),
    "numpy": (("ndarray", "ndarray"), ("bool_", "np"), ("integer", "np"), ("floating", "np"),
              ("complexfloating", "np"), ("generic", "-generic")),
    "pandas._libs.tslibs.timestamps": (("_Timestamp", "timestamp"),),
    "pandas._libs.tslibs.timedeltas": (("_Timedelta", "pd_timedelta"),),
    "pandas._libs.tslibs.nattype": (("_NaT", "nat"),),
    "pandas._libs.missing": (("C_NAType", "na"),),
}
# Objects that exist once per interpreter: (module, attribute, name).
_SINGLETONS = (("numpy", "nan", "numpy.nan"), ("pandas._libs.tslibs.nattype", "NaT", "pandas.NaT"),
               ("pandas._libs.missing", "NA", "pandas.NA"))


def encode(value, plain=False):
    """Canonical text of `value` and whether it may compare equal to anything.

    Returns (text, comparable). compare.same() decides equality from two such pairs.
    plain: numpy scalars written as the numbers they hold, for a text that will be compared
    by its digest alone (a long one), where no rule can look inside.
    """
    never_equal = []  # gets an entry for each NaN or opaque object met
    text = _Encoder(never_equal, plain).value(value, set())
    return text, not never_equal


def _library():
    """{id(type): (kind, type)} and {id(object): name} of the library modules loaded now."""
    kinds, singletons = {}, {id(_MATH_NAN): "math.nan"}
    for module_name, wanted in _LIBRARY_TYPES.items():
        namespace = _namespace(module_name)
        for attribute, kind in wanted:
            found = dict.get(namespace, attribute)
            if isinstance(found, type):  # (a real class: isinstance of `type` asks no metaclass)
                kinds[id(found)] = (kind, found)
    for module_name, attribute, name in _SINGLETONS:
        found = dict.get(_namespace(module_name), attribute, None)
        if found is not None:
            singletons[id(found)] = name
    return kinds, singletons


def _namespace(module_name):
    module = dict.get(_MODULES, module_name)
    if type(module) is not _MODULE_TYPE:
        return {}
    namespace = _MODULE_DICT(module)
    return namespace if type(namespace) is dict else {}


class _Encoder:
    def __init__(self, never_equal, plain=False):
        self.never_equal, self.plain = never_equal, plain
        self.kinds, self.singletons = _library()
        self.known = {}  # id(type) -> (kind, base, type): a long list holds few types
        self.names = {}  # id(type) -> the name a numpy scalar is marked with
        generic = self.library_type("numpy", "generic")
        self.numpy_item = _GET(generic, "item") if generic is not None else None

    def never(self, text):
        self.never_equal.append(1)
        return text

    def kind_of(self, kind):
        """(kind name, base type) of a type: its first builtin or library base, or (None, None)."""
        for base in _MRO(kind):
            builtin = _BUILTIN_KINDS.get(id(base))
            if builtin is not None:
                return builtin.__name__, builtin  # bool counts as int
            known = self.kinds.get(id(base))
            if known is not None and known[1] is base:
                return known
        return None, None

    def value(self, value, path):
        if value is None:
            return "None"
        singleton = self.singletons.get(id(value))
        if singleton is not None:
            # Inside a container `==` takes identity as equality; at the top level it is a NaN, NaT or NA.
            return singleton if path else self.never(singleton)
        name = _BUILTIN_NAME.get(id(value))
        if name is not None and _BUILTINS[name] is value:
            return "<builtin " + name + ">"
        kind_type = type(value)
        known = self.known.get(id(kind_type))
        if known is None or known[2] is not kind_type:
            known = self.known[id(kind_type)] = self.kind_of(kind_type) + (kind_type,)
        kind, base = known[0], known[1]
        if kind is None or kind[0] == "-":
            return self.never("<opaque " + _type_name(type(value)) + ">")
        if kind == "int":
            return int.__repr__(value)  # for bool too: int.__repr__(True) == "1"
        if kind == "float":
            return self.real_float(float.__float__(value))
        if kind == "complex":
            # The member descriptors of complex itself, so a subclass's `real` property is ignored.
            return self.complex(complex.real.__get__(value), complex.imag.__get__(value))
        if kind == "str":
            return ascii(str.__getitem__(value, slice(None)))  # exact str copy, then escaped
        if kind in ("bytes", "bytearray"):
            return repr(bytes(base.__getitem__(value, slice(None))))
        if kind == "range":
            return _range(range.start.__get__(value), range.stop.__get__(value), range.step.__get__(value))
        if kind == "decimal":
            return self.decimal(base.__str__(value))
        if kind == "fraction":
            return self.fraction(value, base)
        if kind == "np":
            return self.numpy_scalar(value)
        if kind in ("datetime", "date", "time", "timedelta", "timestamp", "pd_timedelta", "nat"):
            return self.temporal(value, kind)
        if kind == "na":
            return self.never("<opaque pandas.NA>")

        # Containers: guard against cycles, which `==` would answer with RecursionError.
        marker = id(value)
        if marker in path:
            return self.never("<cycle>")
        path.add(marker)
        try:
            return self.container(value, kind, base, path)
        finally:
            path.discard(marker)

    def container(self, value, kind, base, path):
        if kind == "tuple":
            items = [self.value(item, path) for item in tuple.__getitem__(value, slice(None))]
            return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
        if kind in ("list", "deque"):
            items = [self.value(item, path) for item in base.__iter__(value)]
            text = "[" + ", ".join(items) + "]"
            return text if kind == "list" else "deque(" + text + ")"
        if kind in ("dict", "counter"):
            pairs = [self.value(key, path) + ": " + self.value(item, path) for key, item in dict.items(value)]
            text = "{" + ", ".join(sorted(pairs)) + "}"
            return text if kind == "dict" else "Counter(" + text + ")"
        if kind == "ordered":
            # The order is the OrderedDict's own (not the dict's, which move_to_end does not
            # change); values are matched to its keys by identity, so no key is hashed.
            item_of = {id(key): item for key, item in dict.items(value)}
            pairs = ["(" + self.value(key, path) + ", " + self.value(item_of[id(key)], path) + ")"
                     for key in base.__iter__(value)]
            return "OrderedDict([" + ", ".join(pairs) + "])"
        if kind == "ndarray":
            return self.array(value, base, path)
        if kind == "dict_items":  # against another items view it compares as a dict, against a set as a set
            pairs = [self.value(pair, path)[1:-1] for pair in base.__iter__(value)]  # "(k, v)" -> "k, v"
            return "dict_items([" + ", ".join("(" + pair + ")" for pair in sorted(pairs)) + "])"
        # set, frozenset, a dict's keys: equal to each other under ==, so one form for all
        items = [self.value(item, path) for item in base.__iter__(value)]
        return "{" + ", ".join(sorted(items)) + "}" if items else "set()"

    def real_float(self, number):
        if number != number:
            return self.never("nan")
        if number == _INF or number == -_INF:
            return "inf" if number > 0 else "-inf"
        if float.is_integer(number):
            # Exact integer value, so 2.0**53 and 2**53 + 1 stay different, as under ==.
            return int.__repr__(int(number))
        return float.__repr__(number)

    def complex(self, real, imag):
        """real and imag: canonical texts or floats."""
        real = real if type(real) is str else self.real_float(real)
        imag = imag if type(imag) is str else self.real_float(imag)
        return real if imag == "0" else "complex(" + real + ", " + imag + ")"

    def decimal(self, text):
        """From Decimal.__str__ (C code): '-1.25E+3', 'NaN', 'sNaN', '-Infinity'."""
        negative = text[:1] == "-"
        text = text.lstrip("+-").lower()
        if "nan" in text:  # a quiet NaN is unequal to all, a signalling one makes == raise
            return self.never("nan")
        if text == "infinity":
            return "-inf" if negative else "inf"
        mantissa, _, exponent = text.partition("e")
        whole, _, fraction = mantissa.partition(".")
        coefficient = int(whole + fraction)
        power = int(exponent or "0") - len(fraction)
        if negative:
            coefficient = -coefficient
        if power >= 0:
            return _rational(coefficient * 10**power, 1)
        return _rational(coefficient, 10**-power)

    def fraction(self, value, base):
        slots = type.__dict__["__dict__"].__get__(base)
        numerator = slots["_numerator"].__get__(value)
        denominator = slots["_denominator"].__get__(value)
        if type(numerator) is not int or type(denominator) is not int or denominator == 0:
            return self.never("<opaque fractions.Fraction>")
        return _rational(numerator, denominator)

    def numpy_scalar(self, value):
        """A numpy bool, integer, float or complex: its exact value, marked as numpy's."""
        item = self.numpy_item(value)  # numpy's C code: a Python int, bool, float or complex
        kind = type(item)
        if kind is int or kind is bool:
            text = int.__repr__(item)
        elif kind is float:
            text = self.real_float(item)
        elif kind is complex:
            text = self.complex(complex.real.__get__(item), complex.imag.__get__(item))
        else:  # longdouble and clongdouble stay numpy scalars: read their parts exactly
            generic = self.library_type("numpy", "generic")
            real, imag = _GET(generic, "real").__get__(value), _GET(generic, "imag").__get__(value)
            text = self.complex(self.long_float(real), self.long_float(imag))
        if self.plain:
            return text
        kind_type = type(value)
        name = self.names.get(id(kind_type))  # the type is alive as long as the value: its id is its own
        if name is None:
            name = "".join(c for c in _type_name(kind_type).rpartition(".")[2] if c.isalnum() or c == "_")
            self.names[id(kind_type)] = name
        return "np." + name + "(" + text + ")"

    def long_float(self, number):
        try:
            ratio = _GET(type(number), "as_integer_ratio")(number)  # a genuine numpy type, made just now by numpy
        except (OverflowError, ValueError):  # inf or nan
            return self.real_float(_GET(type(number), "__float__")(number))
        return _rational(ratio[0], ratio[1])

    def library_type(self, module_name, attribute):
        found = dict.get(_namespace(module_name), attribute)
        return found if isinstance(found, type) else None

    def array(self, value, base, path):
        get = lambda name: _GET(base, name).__get__(value)  # noqa: E731  (the ndarray's own getsets)
        size, ndim = get("size"), get("ndim")
        if size != 1:  # the truth value of a comparison with it raises (or is False): never equal
            return self.never("array(shape=" + self.value(tuple(get("shape")), path) + ")")
        element = _GET(base, "__getitem__")(value, (0,) * ndim)
        return "array(" + "[" * ndim + self.value(element, path) + "]" * ndim + ")"

    def temporal(self, value, kind):
        """date, datetime, time, timedelta and pandas' Timestamp and Timedelta, by value."""
        if kind == "nat":
            return self.never("pandas.NaT")
        types = {name: self.library_type("datetime", name) for name in ("date", "datetime", "time", "timedelta")}
        field = lambda owner, name: _GET(types[owner], name).__get__(value)  # noqa: E731
        if kind == "pd_timedelta":  # nanoseconds: a timedelta's microseconds lose some
            nanoseconds = self.pandas_ns("pandas._libs.tslibs.timedeltas", "_Timedelta", value)
            return self.never("<opaque pandas.Timedelta>") if nanoseconds is None else _timedelta(nanoseconds)
        if kind == "timestamp":  # its value is the UTC instant (of the wall clock if naive), in nanoseconds
            nanoseconds = self.pandas_ns("pandas._libs.tslibs.timestamps", "_Timestamp", value)
            if nanoseconds is None:
                return self.never("<opaque pandas.Timestamp>")
            aware = field("datetime", "tzinfo") is not None
            return "datetime('" + _instant(nanoseconds) + ("Z" if aware else "") + "')"
        if kind == "timedelta":
            micro = (field("timedelta", "days") * 86400 + field("timedelta", "seconds")) * 10**6
            return _timedelta((micro + field("timedelta", "microseconds")) * 1000)
        if kind == "date":
            return "date('%04d-%02d-%02d')" % (field("date", "year"), field("date", "month"), field("date", "day"))
        offset = self.utc_offset(field("datetime" if kind != "time" else "time", "tzinfo"))
        if offset is False:
            return self.never("<opaque " + _type_name(type(value)) + " with a time zone>")
        if kind == "time":
            micro = ((field("time", "hour") * 60 + field("time", "minute")) * 60 + field("time", "second")) * 10**6
            micro += field("time", "microsecond")
            if offset is None:
                return "time('" + _clock(micro * 1000) + "')"
            return "time('" + _clock((micro - offset) * 1000) + "Z')"
        days = _GET(types["date"], "toordinal")(value) - _EPOCH
        micro = ((field("datetime", "hour") * 60 + field("datetime", "minute")) * 60 + field("datetime", "second"))
        micro = (days * 86400 + micro) * 10**6 + field("datetime", "microsecond")
        if offset is None:
            return "datetime('" + _instant(micro * 1000) + "')"
        return "datetime('" + _instant((micro - offset) * 1000) + "Z')"

    def utc_offset(self, tzinfo):
        """None for naive, microseconds for a datetime.timezone, False for any other tzinfo
        (its utcoffset is code we would have to run)."""
        if tzinfo is None:
            return None
        timezone = self.library_type("datetime", "timezone")
        if timezone is None or type(tzinfo) is not timezone:
            return False
        delta = _GET(timezone, "utcoffset")(tzinfo, None)
        timedelta = self.library_type("datetime", "timedelta")
        days, seconds = _GET(timedelta, "days").__get__(delta), _GET(timedelta, "seconds").__get__(delta)
        return (days * 86400 + seconds) * 10**6 + _GET(timedelta, "microseconds").__get__(delta)

    def pandas_ns(self, module_name, class_name, value):
        owner = self.library_type(module_name, class_name)
        slots = type.__dict__["__dict__"].__get__(owner) if owner is not None else {}
        for name in ("_value", "value"):  # pandas 2 renamed it
            found = slots.get(name)
            if found is not None:
                nanoseconds = found.__get__(value)
                return nanoseconds if type(nanoseconds) is int else None
        return None


def _GET(kind, name):
    """An attribute of a (library or builtin) type, looked up on the type itself."""
    return type.__getattribute__(kind, name)


def _rational(numerator, denominator):
    """Canonical text of numerator/denominator (denominator != 0), exactly."""
    if denominator < 0:
        numerator, denominator = -numerator, -denominator
    common = _gcd(numerator, denominator)
    numerator, denominator = numerator // common, denominator // common
    if denominator == 1:
        return int.__repr__(numerator)
    if denominator & (denominator - 1) == 0:  # a power of two: perhaps exactly a double
        try:
            nearest = numerator / denominator  # int / int rounds correctly
        except OverflowError:
            nearest = None
        if nearest is not None and nearest != 0 and float.as_integer_ratio(nearest) == (numerator, denominator):
            return float.__repr__(nearest)
    return "%d/%d" % (numerator, denominator)


def _range(start, stop, step):
    """range(3) == range(0, 3) == range(0, 3, 1); every empty range is equal; so are ranges
    of one element with the same start."""
    length = len(range(start, stop, step))
    if length == 0:
        return "range(0)"
    if length == 1:
        return "range(%d, %d)" % (start, start + 1)
    stop = start + length * step
    return "range(%d, %d)" % (start, stop) if step == 1 else "range(%d, %d, %d)" % (start, stop, step)


def _clock(nanoseconds):
    """'HH:MM:SS[.fffffffff]', with a sign and hours past 23 where a UTC shift puts them."""
    sign = "-" if nanoseconds < 0 else ""
    seconds, fraction = divmod(abs(nanoseconds), 10**9)
    text = "%s%02d:%02d:%02d" % (sign, seconds // 3600, seconds // 60 % 60, seconds % 60)
    return text + ("." + ("%09d" % fraction).rstrip("0") if fraction else "")


def _instant(nanoseconds):
    """'YYYY-MM-DDTHH:MM:SS[.fffffffff]' of nanoseconds since 1970-01-01T00:00."""
    days, rest = divmod(nanoseconds, _NS_PER_DAY)
    year, month, day = _civil(days)
    return "%04d-%02d-%02dT%s" % (year, month, day, _clock(rest))


def _civil(days):
    """(year, month, day) of a count of days since 1970-01-01 (proleptic Gregorian)."""
    days += 719468
    era = days // 146097
    day_of_era = days - era * 146097
    year_of_era = (day_of_era - day_of_era // 1460 + day_of_era // 36524 - day_of_era // 146096) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    month_index = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * month_index + 2) // 5 + 1
    month = month_index + 3 if month_index < 10 else month_index - 9
    return year_of_era + era * 400 + (month <= 2), month, day


def _timedelta(nanoseconds):
    if nanoseconds == 0:
        return "timedelta(0)"
    days, rest = divmod(nanoseconds, _NS_PER_DAY)
    seconds, fraction = divmod(rest, 10**9)
    parts = [("days", days), ("seconds", seconds), ("nanoseconds", fraction)]
    return "timedelta(" + ", ".join("%s=%d" % part for part in parts if part[1]) + ")"


def _type_name(kind):
    """`module.Qualname` of a type, reduced to safe characters (names can be anything)."""
    try:
        module = type.__getattribute__(kind, "__module__")
        name = type.__getattribute__(kind, "__qualname__")
        text = str.__str__(module) + "." + str.__str__(name)
    except BaseException:
        return "?"
    return "".join(c for c in text[:120] if c.isalnum() or c in "._<>")
