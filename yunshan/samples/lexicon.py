"""Vocabularies the sample generators draw from: people, companies, places, dates, amounts, numerals.

Everything here is authored for yunshan (no external word lists). The lists are large enough that their
combinations almost never repeat (a Chinese company name alone has about 10^8 spellings), so a sentence in a
held-out document matches a training sentence only by chance. Used by the other modules of yunshan.samples;
nothing to run on its own.
"""

from __future__ import annotations

import datetime
import random

# ---------------------------------------------------------------------------------------------- Chinese people
ZH_SURNAMES = tuple(
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何林高罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈姚卢"
    "姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵万钱严覃武戴莫孔向汤常温"
)
ZH_GIVEN = tuple(
    "伟芳娜敏静丽强磊军洋勇艳杰娟涛明超秀霞平刚桂英华玉萍红鹏辉建峰宇浩凯晨欣怡婷雪梅琳晶斌波宁俊博文轩然"
    "思佳颖慧鑫昊悦瑶嘉睿泽航子涵琪诗雨彤可馨若晓东海云志国庆春秋冬立新永健康安乐天成德清源远航卫兵建设"
)

# ---------------------------------------------------------------------------------------------- English people
EN_FIRST = (
    "James", "Mary", "Robert", "Patricia", "John", "Jennifer", "Michael", "Linda", "David", "Elizabeth",
    "William", "Barbara", "Richard", "Susan", "Joseph", "Jessica", "Thomas", "Sarah", "Charles", "Karen",
    "Daniel", "Nancy", "Matthew", "Lisa", "Anthony", "Betty", "Mark", "Sandra", "Donald", "Ashley", "Steven",
    "Kimberly", "Paul", "Emily", "Andrew", "Donna", "Joshua", "Michelle", "Kenneth", "Carol", "Kevin", "Amanda",
    "Brian", "Melissa", "George", "Deborah", "Timothy", "Stephanie", "Ronald", "Rebecca", "Jason", "Laura",
    "Edward", "Helen", "Jeffrey", "Sharon", "Ryan", "Cynthia", "Jacob", "Kathleen", "Gary", "Amy", "Nicholas",
    "Angela", "Eric", "Anna", "Jonathan", "Ruth", "Stephen", "Olivia", "Larry", "Grace", "Justin", "Chloe",
    "Wei", "Li", "Ming", "Hui", "Priya", "Arjun", "Sofia", "Lucas", "Mateo", "Hana", "Kenji", "Amara",
)
EN_LAST = (
    "Smith", "Johnson", "Williams", "Brown", "Jones", "Garcia", "Miller", "Davis", "Rodriguez", "Martinez",
    "Hernandez", "Lopez", "Gonzalez", "Wilson", "Anderson", "Thomas", "Taylor", "Moore", "Jackson", "Martin",
    "Lee", "Perez", "Thompson", "White", "Harris", "Sanchez", "Clark", "Ramirez", "Lewis", "Robinson", "Walker",
    "Young", "Allen", "King", "Wright", "Scott", "Torres", "Nguyen", "Hill", "Flores", "Green", "Adams", "Nelson",
    "Baker", "Hall", "Rivera", "Campbell", "Mitchell", "Carter", "Roberts", "Chen", "Wang", "Zhang", "Liu",
    "Patel", "Kim", "Park", "Tanaka", "Sato", "Muller", "Schmidt", "Rossi", "Dubois", "Novak", "Larsen",
    "Okafor", "Mensah", "Silva", "Costa", "Murphy", "Kelly", "Price", "Bennett", "Wood", "Barnes", "Ross",
)

# ---------------------------------------------------------------------------------------------- places
ZH_CITIES = (
    "北京", "上海", "广州", "深圳", "天津", "重庆", "杭州", "南京", "苏州", "武汉", "成都", "西安", "长沙", "郑州",
    "青岛", "济南", "沈阳", "大连", "哈尔滨", "长春", "石家庄", "太原", "合肥", "福州", "厦门", "南昌", "昆明",
    "贵阳", "南宁", "海口", "兰州", "西宁", "银川", "呼和浩特", "乌鲁木齐", "拉萨", "宁波", "温州", "无锡",
    "常州", "徐州", "扬州", "南通", "绍兴", "嘉兴", "台州", "金华", "泉州", "漳州", "佛山", "东莞", "珠海",
    "中山", "惠州", "汕头", "湛江", "桂林", "柳州", "洛阳", "开封", "襄阳", "宜昌", "岳阳", "株洲", "芜湖",
    "蚌埠", "烟台", "潍坊", "临沂", "淄博", "唐山", "保定", "邯郸", "大同", "包头", "鞍山", "吉林", "齐齐哈尔",
    "绵阳", "宜宾", "遵义", "大理", "丽江", "三亚", "九江", "赣州", "黄山", "秦皇岛", "威海", "日照", "舟山",
)
ZH_DISTRICTS = (
    "东城", "西城", "朝阳", "海淀", "浦东新", "徐汇", "静安", "天河", "越秀", "南山", "福田", "鼓楼", "玄武",
    "江汉", "武昌", "锦江", "武侯", "雁塔", "碑林", "岳麓", "金水", "市南", "历下", "和平", "南岗", "高新",
    "经开", "滨湖", "思明", "湖里", "西湖", "上城", "拱墅", "滨江", "萧山", "余杭", "江北", "渝中", "沙坪坝",
    "新城", "开发", "城关", "中心", "北湖", "南湖", "龙华", "宝安", "龙岗", "黄埔", "番禺", "花都", "江宁",
)
ZH_PROVINCES = (
    "河北", "山西", "辽宁", "吉林", "黑龙江", "江苏", "浙江", "安徽", "福建", "江西", "山东", "河南", "湖北",
    "湖南", "广东", "海南", "四川", "贵州", "云南", "陕西", "甘肃", "青海",
)
ZH_STREETS = (
    "人民", "解放", "建设", "中山", "和平", "胜利", "文化", "友谊", "长江", "黄河", "新华", "光明", "幸福", "滨江",
    "环城", "朝阳", "东风", "红旗", "民主", "青年", "科技", "学府", "振兴", "复兴", "团结", "迎宾", "世纪", "金融",
)
EN_CITIES = (
    "London", "Paris", "Berlin", "Madrid", "Rome", "Vienna", "Prague", "Warsaw", "Lisbon", "Dublin", "Oslo",
    "Stockholm", "Helsinki", "Copenhagen", "Amsterdam", "Brussels", "Zurich", "Geneva", "Athens", "Istanbul",
    "Cairo", "Nairobi", "Lagos", "Cape Town", "Dubai", "Mumbai", "Delhi", "Bangkok", "Singapore", "Jakarta",
    "Manila", "Seoul", "Tokyo", "Osaka", "Sydney", "Melbourne", "Auckland", "Toronto", "Vancouver", "Montreal",
    "Chicago", "Boston", "Seattle", "Denver", "Austin", "Atlanta", "Miami", "Phoenix", "Houston", "Dallas",
    "Mexico City", "Lima", "Bogota", "Santiago", "Buenos Aires", "Sao Paulo", "Shanghai", "Beijing", "Shenzhen",
    "Hangzhou", "Chengdu", "Wuhan", "Nanjing", "Xi'an", "Kyoto", "Hanoi", "Kuala Lumpur", "Lyon", "Munich",
    "Milan", "Barcelona", "Porto", "Edinburgh", "Manchester", "Glasgow", "Krakow", "Budapest", "Tallinn",
)

# ---------------------------------------------------------------------------------------------- companies
# A Chinese listed-company name: city + two brand characters + industry + legal form, e.g. 杭州恒信电子股份有限公司.
ZH_BRAND_CHARS = tuple(
    "华新远恒达信瑞嘉德泰宏盛隆兴安康永鑫源鼎丰海天中金银东南西北正阳光明星辰润通利益众合联创科智博汇凯晟昌"
    "顺祥福禄宝丽美佳优卓越腾飞宇宙航洲洋川岳峰林森桦松竹梅兰菊蓝绿青紫云霞虹彩晶石玉龙凤麒麟鹏鹤驰骏"
)
ZH_INDUSTRIES = (
    "科技", "电子", "医药", "能源", "化工", "食品", "物流", "建材", "环保", "纺织", "汽车零部件", "新材料",
    "半导体", "传媒", "农业", "生物", "机械", "电气", "智能装备", "软件", "通信", "光电", "精密制造", "家居",
    "乳业", "酒业", "钢铁", "铝业", "水务", "燃气", "旅游", "地产", "建设", "交通", "港口", "航空", "物产",
    "商贸", "纸业", "矿业", "电力", "新能源", "储能", "医疗器械", "信息技术", "数据", "网络", "文化",
)
ZH_COMPANY_FORMS = ("股份有限公司", "股份有限公司", "集团股份有限公司", "控股股份有限公司")
ZH_PRIVATE_FORMS = ("有限公司", "有限责任公司", "贸易有限公司", "实业有限公司", "商贸有限公司", "工程有限公司")

EN_BRAND_WORDS = (
    "Northstar", "Bluewater", "Granite", "Silverline", "Evergreen", "Redwood", "Summit", "Harbor", "Crescent",
    "Pioneer", "Meridian", "Atlas", "Beacon", "Cobalt", "Horizon", "Keystone", "Lakeshore", "Maple", "Orion",
    "Pinnacle", "Quartz", "Riverside", "Sterling", "Trident", "Unity", "Vertex", "Westbrook", "Zenith", "Aurora",
    "Brightwell", "Cedar", "Delta", "Eastgate", "Falcon", "Golden Gate", "Highland", "Ironwood", "Juniper",
    "Kestrel", "Lumen", "Monarch", "Nova", "Oakridge", "Polaris", "Ridgeway", "Sapphire", "Tidewater", "Upland",
)
EN_INDUSTRIES = (
    "Technologies", "Energy", "Pharmaceuticals", "Logistics", "Materials", "Foods", "Semiconductors", "Media",
    "Biotech", "Machinery", "Software", "Networks", "Robotics", "Chemicals", "Textiles", "Motors", "Utilities",
    "Minerals", "Paper", "Devices", "Analytics", "Instruments", "Power", "Retail", "Shipping", "Aerospace",
)
EN_COMPANY_FORMS = ("Inc.", "Corp.", "Holdings Ltd.", "Group plc", "Co., Ltd.", "Limited")

# ---------------------------------------------------------------------------------------------- numerals
_CN_DIGITS = "零一二三四五六七八九"


def cn_numeral(n: int) -> str:
    """Write 0 <= n < 10000 in Chinese numerals as statutes do: 188 -> 一百八十八, 10 -> 十, 105 -> 一百零五."""
    if not 0 <= n < 10000:
        raise ValueError(f"cn_numeral supports 0..9999, got {n}")
    if n == 0:
        return "零"
    units = ((1000, "千"), (100, "百"), (10, "十"), (1, ""))
    out, zero_pending, started = [], False, False
    for value, unit in units:
        d = (n // value) % 10
        if d == 0:
            zero_pending = started
            continue
        if zero_pending:
            out.append("零")
            zero_pending = False
        # "十" alone for 10..19 at the start (十二, not 一十二), as written in statute numbering.
        if not (value == 10 and d == 1 and not started):
            out.append(_CN_DIGITS[d])
        out.append(unit)
        started = True
    return "".join(out)


# ---------------------------------------------------------------------------------------------- draws
def zh_person(rng: random.Random) -> str:
    """A Chinese full name of two or three characters."""
    given = rng.choice(ZH_GIVEN) + (rng.choice(ZH_GIVEN) if rng.random() < 0.7 else "")
    return rng.choice(ZH_SURNAMES) + given


def zh_anon_person(rng: random.Random) -> str:
    """An anonymised party name in the style of published judgments: 张某, 李某某, 王某甲."""
    return rng.choice(ZH_SURNAMES) + rng.choice(("某", "某某", "某甲", "某乙", "某丙", "某1", "某2"))


def en_person(rng: random.Random) -> str:
    """An English full name."""
    return f"{rng.choice(EN_FIRST)} {rng.choice(EN_LAST)}"


def zh_company(rng: random.Random, listed: bool = True) -> str:
    """A Chinese company name; listed=True gives a joint-stock form used by listed issuers."""
    forms = ZH_COMPANY_FORMS if listed else ZH_PRIVATE_FORMS
    return (rng.choice(ZH_CITIES) + rng.choice(ZH_BRAND_CHARS) + rng.choice(ZH_BRAND_CHARS)
            + rng.choice(ZH_INDUSTRIES) + rng.choice(forms))


def zh_short_name(full: str) -> str:
    """The short name (简称) of a company produced by zh_company: the two brand characters plus 股份 or 公司."""
    for city in sorted(ZH_CITIES, key=len, reverse=True):
        if full.startswith(city):
            return full[len(city):len(city) + 2] + ("股份" if "股份" in full else "公司")
    return full[:4]


def en_company(rng: random.Random) -> str:
    """An English company name such as 'Granite Logistics Holdings Ltd.'."""
    return f"{rng.choice(EN_BRAND_WORDS)} {rng.choice(EN_INDUSTRIES)} {rng.choice(EN_COMPANY_FORMS)}"


def stock_code(rng: random.Random) -> str:
    """A six-digit A-share style security code."""
    return rng.choice(("600", "601", "603", "605", "000", "001", "002", "003", "300", "301", "688")) + \
        f"{rng.randrange(1000):03d}"


def zh_court(rng: random.Random, level: str = "basic") -> str:
    """A court name: a district people's court (basic) or an intermediate people's court."""
    city = rng.choice(ZH_CITIES)
    if level == "intermediate":
        return f"{city}市中级人民法院"
    return f"{city}市{rng.choice(ZH_DISTRICTS)}区人民法院"


def zh_address(rng: random.Random) -> str:
    """A street address such as 成都市武侯区人民路118号."""
    return (f"{rng.choice(ZH_CITIES)}市{rng.choice(ZH_DISTRICTS)}区{rng.choice(ZH_STREETS)}"
            f"{rng.choice(('路', '街', '大道'))}{rng.randrange(1, 999)}号")


def zh_date(rng: random.Random, years: tuple[int, int] = (2015, 2024)) -> tuple[int, int, int]:
    """A (year, month, day) triple with a valid day for every month."""
    y = rng.randint(*years)
    m = rng.randint(1, 12)
    return y, m, rng.randint(1, 28)


def fmt_zh_date(ymd: tuple[int, int, int]) -> str:
    y, m, d = ymd
    return f"{y}年{m}月{d}日"


_EN_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
              "October", "November", "December")


def fmt_en_date(ymd: tuple[int, int, int]) -> str:
    y, m, d = ymd
    return f"{_EN_MONTHS[m - 1]} {d}, {y}"


def fmt_money(x: float) -> str:
    """Thousands separators and two decimals: 1234567.8 -> '1,234,567.80'."""
    return f"{x:,.2f}"


def fmt_pct(x: float) -> str:
    """A signed-free percentage with two decimals: 0.1234 -> '12.34%'."""
    return f"{x * 100:.2f}%"


# ---------------------------------------------------------------------------------------------- firms and orgs
_ZH_FIRM_WORDS = ("天健", "立信", "中汇", "信永", "致同", "大信", "容诚", "中兴", "华兴", "永拓", "众华", "中审",
                  "亚太", "中勤", "华普", "天职", "利安", "北斗", "金诚", "德衡", "汇业", "锦天", "君合", "中伦",
                  "国浩", "大成", "环球", "海华", "通力", "竞天", "康达", "天元", "观韬", "炜衡", "浩天", "安杰")


def zh_auditor(rng: random.Random) -> str:
    """An audit firm name such as 华兴会计师事务所（特殊普通合伙）."""
    return rng.choice(_ZH_FIRM_WORDS) + rng.choice(("", "永信", "华明", "正信", "恒通")) + "会计师事务所（特殊普通合伙）"


def zh_law_firm(rng: random.Random) -> str:
    """A law firm name such as 北京君合律师事务所."""
    return rng.choice(ZH_CITIES) + rng.choice(_ZH_FIRM_WORDS) + rng.choice(("", "正和", "明理", "恒信")) + "律师事务所"


def en_firm(rng: random.Random, kind: str = "audit") -> str:
    """An English professional firm: audit ('... & Co. LLP') or law ('... LLP')."""
    a, b = rng.sample(EN_LAST, 2)
    return f"{a} {b} & Co. LLP" if kind == "audit" else f"{a} & {b} LLP"


def zh_org(rng: random.Random) -> str:
    """A Chinese organisation used as a neutral source in sentences (a firm, an association, a school)."""
    return rng.choice((
        lambda: zh_auditor(rng), lambda: zh_law_firm(rng), lambda: rng.choice(ZH_CITIES) + "市注册会计师协会",
        lambda: rng.choice(ZH_CITIES) + rng.choice(("财经", "政法", "工商", "经贸")) + "学院",
        lambda: rng.choice(ZH_CITIES) + "市律师协会", lambda: zh_company(rng),
    ))()


def en_org(rng: random.Random) -> str:
    """An English organisation used as a neutral source in sentences."""
    return rng.choice((
        lambda: en_firm(rng, "audit"), lambda: en_firm(rng, "law"), lambda: en_company(rng),
        lambda: f"the {rng.choice(EN_CITIES)} Institute of {rng.choice(('Accountants', 'Finance', 'Law'))}",
        lambda: f"the {rng.choice(EN_CITIES)} Bar Association",
    ))()


def weekday_after(ymd: tuple[int, int, int], days: int = 1) -> tuple[int, int, int]:
    """The date `days` calendar days after `ymd`, moved forward to a Monday-Friday (for trading/record dates)."""
    d = datetime.date(*ymd) + datetime.timedelta(days=days)
    while d.weekday() >= 5:
        d += datetime.timedelta(days=1)
    return d.year, d.month, d.day


def add_days(ymd: tuple[int, int, int], days: int) -> tuple[int, int, int]:
    """Calendar arithmetic on (year, month, day)."""
    d = datetime.date(*ymd) + datetime.timedelta(days=days)
    return d.year, d.month, d.day


def days_between(a: tuple[int, int, int], b: tuple[int, int, int]) -> int:
    """Number of days from a to b."""
    return (datetime.date(*b) - datetime.date(*a)).days
