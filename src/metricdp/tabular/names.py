"""Column names as compared by what leaves: Unicode-normalised keys and coordinate words.

Names lie in two ways a byte comparison misses: the same name spelt differently (full-width
letters, a zero-width joiner, a Cyrillic ``а`` in ``lаt``) and another name for the same
thing (``latlng``, ``geom``, ``breite``). :func:`name_key` folds the first (NFKC, format
characters dropped, casefolded, a confusable skeleton in the manner of Unicode TR 39 for
Cyrillic and Greek letters that look Latin, accents off, letters and digits only);
:func:`coordinate_role` names the second for coordinates, in English, German, French,
Spanish, Portuguese, Italian and Dutch. :mod:`metricdp.tabular.columns` and
:mod:`metricdp.tabular.leaks` compare names through these only.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["coordinate_role", "name_key"]

# A confusable skeleton (TR 39 style) for the Cyrillic and Greek letters that look like Latin ones.
_CONFUSABLES = str.maketrans({
    "а": "a", "в": "b", "е": "e", "ё": "e", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p", "с": "c",
    "т": "t", "у": "y", "х": "x", "ѕ": "s", "і": "i", "ї": "i", "ј": "j", "һ": "h", "ԁ": "d", "ԛ": "q",
    "ԝ": "w", "ɡ": "g", "ӏ": "l", "ᴦ": "r", "г": "r", "п": "n", "ь": "b", "и": "u", "л": "n",
    "α": "a", "β": "b", "ε": "e", "η": "n", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p", "τ": "t",
    "υ": "u", "χ": "x", "γ": "y", "ω": "w", "μ": "u", "ς": "c", "σ": "o",
})

_LAT = frozenset({"lat", "latitude", "y", "breite", "breitengrad", "latitud", "latitudine", "breedte",
                  "breedtegraad", "shirota", "wei"})
_LON = frozenset({"lon", "lng", "long", "longitude", "x", "laenge", "lange", "langengrad", "laengengrad",
                  "longitud", "longitudine", "lengte", "lengtegraad", "dolgota", "jing"})
_PAIR = frozenset({"latlon", "latlng", "lonlat", "lnglat", "latlong", "longlat", "coord", "coords", "coordinate",
                   "coordinates", "coordinaten", "koordinaten", "koordinate", "coordonnees", "coordenadas",
                   "coordinata", "geom", "geometry", "geo", "wkt", "wkb", "geojson", "point", "location",
                   "loc", "position", "latlonpair", "gps", "geopoint", "geoloc", "geolocation",
                   "standort", "ubicacion", "posicion", "localizacao", "posizione", "ligging"})


def name_key(name: str) -> str:
    """A name as compared: NFKC, format characters dropped, casefolded, confusables mapped, letters and digits only."""
    text = unicodedata.normalize("NFKC", name)
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf").casefold().translate(_CONFUSABLES)
    text = unicodedata.normalize("NFKD", text)  # accents off: "coordonnées" -> "coordonnees"
    return "".join(ch for ch in text if (ch.isascii() and ch.isalnum()) or (not ch.isascii() and ch.isalpha()))


def _words(name: str) -> list[str]:
    text = unicodedata.normalize("NFKC", name)
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf").translate(_CONFUSABLES)
    text = re.sub(r"([a-z])([A-Z])", r"\1_\2", text)  # camelCase splits
    text = unicodedata.normalize("NFKD", text.casefold().translate(_CONFUSABLES))
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Mn")
    return [w for w in re.split(r"[^0-9a-z]+|(?<=[a-z])(?=\d)|(?<=\d)(?=[a-z])", text) if w and not w.isdigit()]


def coordinate_role(name: str) -> str | None:
    """``"lat"``, ``"lon"``, ``"pair"`` (a column that may hold both) or None, from a column's name."""
    words = _words(name)
    joined = "".join(words)
    if any(w in _PAIR for w in words) or joined in _PAIR:
        return "pair"
    if any(w in _LAT for w in words):
        return "lat"
    if any(w in _LON for w in words):
        return "lon"
    return None


