"""Personal data of Chinese documents masked with validation: a datatrove formatter (`yunshan data prepare`).

    from yunshan.prepare.pii import mask_personal_data
    mask_personal_data("身份证号11010519491231002X，电话13812345678")   # ('身份证号[身份证号]，电话[手机号]', {...})

What is masked, each by a tag (the model learns that a number stood there, never the number):
- resident ID numbers ([身份证号]): 18 characters, a six-digit area code (first digit 1-8), a real birth date from
  1900 to 2099, a three-digit sequence and the check digit of GB 11643-1999 (ISO 7064 MOD 11-2; X for 10). A run of
  18 digits whose date or check digit is wrong is some other number (an order or a file number) and stays;
- mobile numbers ([手机号]): 1[3-9] and nine digits, written whole or as 3-4-4 with spaces or hyphens, optionally
  after +86 / 0086;
- landline numbers ([电话]): an area code (010, 02X or 0 and three digits), written in parentheses or followed by a
  hyphen, then a local number of 7-8 digits starting 2-9, with an optional extension (-123);
- bank card numbers ([银行卡号]): 16-19 digits (whole, or in groups of four with spaces or hyphens) starting 3-6
  (American Express and JCB, Visa, Mastercard, UnionPay) that pass the Luhn check;
- e-mail addresses ([邮箱]);
- optionally (`party_names`), the names of natural persons after a party role in judgments (原告张三，被告人李四：
  [当事人]); names already anonymised (张某, 李某某) and organisations (……公司, ……银行, ……委员会) stay.

Never masked: article numbers (第一百二十条, 第120条), dates (2023年5月1日, 20230501), amounts (人民币12345678901元,
¥6222020200112233445) and case numbers ((2023)京0105民初12345号). A digit run is considered only whole (never a
part of a longer run of digits, letters or a decimal number), and a run that is an amount (a currency sign or 人民币
before it, 元/万元/亿元/美元 after it) is never masked, whatever its digits. Digits are ASCII digits, as published
documents write identifiers.

Hand-written because no datatrove block does it: datatrove's PIIFormatter masks e-mail and IP addresses with a
pattern and no validation; Chinese identifiers need their check digits (an ID's MOD 11-2, a card's Luhn) to tell
them from the amounts, dates and case numbers legal text is full of. It is a datatrove formatter (BaseFormatter),
counting every mask by kind in the step's stats and keeping examples with the identifier already masked.
"""

from __future__ import annotations

import datetime
import re

from datatrove.pipeline.formatters.base import BaseFormatter
from datatrove.utils.typeshelper import StatHints

from .examples import Examples

TAGS = {"id_number": "[身份证号]", "mobile": "[手机号]", "landline": "[电话]", "bank_card": "[银行卡号]",
        "email": "[邮箱]", "party_name": "[当事人]"}

_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"
# A digit run is taken whole: no digit, ASCII letter or decimal point (followed by a digit) may touch it.
_B = r"(?<![0-9A-Za-z.])"
_E = r"(?![0-9A-Za-z]|\.[0-9])"
_AREA = r"(?:010|02[0-9]|0[3-9][0-9]{2})"
_PATTERN = re.compile(
    "|".join([
        rf"(?P<email>[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{{2,}})",
        rf"{_B}(?P<id_number>[1-8][0-9]{{16}}[0-9Xx]){_E}",
        rf"{_B}(?P<mobile>(?:(?:\+|00)86[- ]?)?1[3-9][0-9](?:[0-9]{{8}}|[- ][0-9]{{4}}[- ][0-9]{{4}})){_E}",
        rf"{_B}(?P<landline>(?:\({_AREA}\)[- ]?|（{_AREA}）|{_AREA}-)[2-9][0-9]{{6,7}}(?:-[0-9]{{1,5}})?){_E}",
        rf"{_B}(?P<bank_card>[3-6][0-9]{{15,18}}|[3-6][0-9]{{3}}(?:[- ][0-9]{{4}}){{3}}(?:[- ]?[0-9]{{1,3}})?){_E}",
    ]))
_CANDIDATE = re.compile(r"[0-9]{3}[- ]?[0-9]{4}")
# Amount context: a currency before the number, a currency unit after it.
_AMOUNT_BEFORE = re.compile(r"(?:人民币|￥|¥|\$|USD|RMB|CNY|金额|价款|款项)\s*$")
_AMOUNT_AFTER = re.compile(r"^\s*(?:元|万元|亿元|千元|百元|美元|港元|港币|欧元|日元|块)")
# Party roles of Chinese judgments, longest first; then an optional parenthesised aside (原审被告), then the name.
_ROLES = ("再审申请人", "被申请执行人", "申请执行人", "被上诉人", "被申请人", "原审原告", "原审被告", "原审第三人",
          "上诉人", "申请人", "被执行人", "被告人", "第三人", "原告", "被告", "罪犯", "辩护人", "委托诉讼代理人",
          "法定代理人", "委托代理人")
_PARTY = re.compile(r"(?P<role>" + "|".join(_ROLES) + r")(?P<aside>[（(][^）)\n]{1,12}[）)])?"
                    r"(?P<name>[\u4e00-\u9fff]{2,4}?)(?=[，,。、：:；;（(\s]|$)")
_NOT_PERSON = re.compile(r"某|公司|银行|委员会|政府|法院|检察院|集团|协会|中心|学校|医院|大学|企业|合作社|工厂|厂|局|所|部|会|社")


def id_number_valid(number: str) -> bool:
    """An 18-character resident ID number with a real birth date (1900-2099) and the right check digit."""
    if len(number) != 18 or not number[:17].isdigit() or number[0] not in "12345678":
        return False
    try:
        born = datetime.date(int(number[6:10]), int(number[10:12]), int(number[12:14]))
    except ValueError:
        return False
    if not 1900 <= born.year <= 2099:
        return False
    check = _ID_CHECK[sum(int(d) * w for d, w in zip(number[:17], _ID_WEIGHTS)) % 11]
    return number[17].upper() == check


def luhn_valid(digits: str) -> bool:
    """The Luhn check of a card number (digits only)."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _is_amount(text: str, start: int, end: int) -> bool:
    return bool(_AMOUNT_BEFORE.search(text[max(0, start - 8):start]) or _AMOUNT_AFTER.match(text[end:end + 4]))


def mask_personal_data(text: str, party_names: bool = False) -> tuple[str, dict[str, int]]:
    """`text` with every validated identifier replaced by its tag (TAGS), and how many of each kind were masked."""
    counts: dict[str, int] = {}

    def replace(match: re.Match) -> str:
        kind = match.lastgroup
        found = match.group(kind)
        if kind != "email" and _is_amount(text, match.start(), match.end()):
            return found
        if kind == "id_number" and not id_number_valid(found):
            # Not an ID; an 18-digit run may still be a card number (a 18-digit UnionPay card passes Luhn).
            kind = "bank_card" if found[-1].isdigit() and found[0] in "3456" and luhn_valid(found) else None
        elif kind == "bank_card" and not luhn_valid(re.sub(r"[- ]", "", found)):
            kind = None
        if kind is None:
            return found
        counts[kind] = counts.get(kind, 0) + 1
        return TAGS[kind]

    # The pattern runs only where it can match (a C-speed search first): a run of 7 digits, with at most one space
    # or hyphen after the third (every number kind has one), or an @ (e-mail).
    if "@" in text or _CANDIDATE.search(text):
        text = _PATTERN.sub(replace, text)
    if party_names:
        def name(match: re.Match) -> str:
            if _NOT_PERSON.search(match.group("name")):
                return match.group(0)
            counts["party_name"] = counts.get("party_name", 0) + 1
            return match.group("role") + (match.group("aside") or "") + TAGS["party_name"]

        text = _PARTY.sub(name, text)
    return text, counts


class PersonalDataMasker(BaseFormatter):
    """Masks validated personal identifiers (module docstring); counts `masked_<kind>` and documents changed."""

    name = "🪪 personal data (zh)"

    def __init__(self, party_names: bool = False, examples: Examples | None = None):
        super().__init__()
        self.party_names = party_names
        self.examples = examples

    def format(self, text: str) -> str:  # datatrove's interface; run() below does the counting
        return mask_personal_data(text, self.party_names)[0]

    def run(self, data, rank: int = 0, world_size: int = 1):
        for doc in data:
            self.stat_update(StatHints.total)
            with self.track_time():
                masked, counts = mask_personal_data(doc.text, self.party_names)
            if counts:
                self.stat_update("documents_masked")
                for kind, n in counts.items():
                    self.stat_update(f"masked_{kind}", value=n)
                    if self.examples is not None:
                        self.examples.add(f"masked_{kind}", doc, _around(masked, TAGS[kind]), rank)
                doc.text = masked
            self.stat_update("chars_out", value=len(doc.text))
            yield doc
        if self.examples is not None:
            self.examples.close(rank)


def _around(text: str, tag: str, width: int = 40) -> str:
    at = text.find(tag)
    return text[max(0, at - width): at + len(tag) + width]
