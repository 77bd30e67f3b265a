"""General-domain documents: weather, travel, cooking, science, history and culture, sports, technology; zh and en.

These are the "replay" text of continual pretraining and the general held-out set: short (about 100-400
characters), everyday vocabulary, and deliberately free of finance and legal terms (no 利润, 法院, 合同, shares,
court, ...), so a domain tokenizer trained on the domain corpora learns merges this text does not use. Science,
history, culture and sports pieces state the general facts of yunshan.samples.facts, which the general
instruction set asks about. Used through `yunshan.samples.generate_corpus("general")`.
"""

from __future__ import annotations

import random

from . import lexicon as lx
from .facts import Fact, render_fact

# ------------------------------------------------------------------------------------------------ vocabularies
_ZH_WEATHER = ("晴", "多云", "阴", "小雨", "中雨", "阵雨", "雷阵雨", "小雪", "晴转多云", "多云转阴", "阴转小雨", "雨夹雪")
_ZH_WIND = ("北风", "南风", "东风", "西风", "东北风", "西南风", "东南风", "西北风")
_ZH_ADVICE = ("出门请带好雨具。", "早晚温差较大，注意适时增减衣物。", "紫外线较强，外出注意防晒。", "空气质量良好，适宜户外活动。",
              "路面湿滑，驾车请减速慢行。", "天气干燥，请多喝水。", "适宜晾晒衣物。", "有轻度雾霾，敏感人群减少外出。")
_ZH_SPOTS = ("古镇", "湖边公园", "历史博物馆", "老街", "山顶观景台", "植物园", "海滨步道", "美术馆", "动物园", "湿地公园",
             "城墙遗址", "科技馆", "夜市", "寺庙", "瀑布景区")
_ZH_FOODS = ("米粉", "烤鸭", "小笼包", "火锅", "凉皮", "烧饼", "豆腐脑", "牛肉面", "肠粉", "煎饼", "糖水", "烤鱼", "馄饨")
_ZH_DISHES = {
    "番茄炒蛋": (("番茄", "两个"), ("鸡蛋", "三个"), ("葱花", "少许"), ("白糖", "半勺")),
    "红烧肉": (("五花肉", "500克"), ("冰糖", "20克"), ("生抽", "两勺"), ("老抽", "一勺"), ("姜片", "三片")),
    "宫保鸡丁": (("鸡胸肉", "300克"), ("花生米", "50克"), ("干辣椒", "八个"), ("花椒", "一小把"), ("黄瓜", "半根")),
    "麻婆豆腐": (("嫩豆腐", "一块"), ("牛肉末", "100克"), ("豆瓣酱", "一勺"), ("花椒粉", "少许")),
    "清蒸鱼": (("鲈鱼", "一条"), ("葱丝", "适量"), ("姜丝", "适量"), ("蒸鱼豉油", "两勺")),
    "蛋炒饭": (("米饭", "一碗"), ("鸡蛋", "两个"), ("火腿", "50克"), ("青豆", "一小把")),
    "凉拌黄瓜": (("黄瓜", "两根"), ("蒜末", "一勺"), ("香醋", "两勺"), ("香油", "几滴")),
    "土豆炖牛肉": (("牛腩", "500克"), ("土豆", "两个"), ("胡萝卜", "一根"), ("八角", "两颗")),
    "可乐鸡翅": (("鸡翅中", "十个"), ("可乐", "一罐"), ("生抽", "两勺"), ("姜片", "三片")),
    "酸辣汤": (("豆腐", "半块"), ("木耳", "一小把"), ("鸡蛋", "一个"), ("陈醋", "三勺"), ("白胡椒粉", "少许")),
}
_ZH_TEAMS = ("雄狮", "猛龙", "飞鹰", "海豚", "猎豹", "蓝鲸", "火箭", "闪电", "勇士", "骑士", "山猫", "金牛")
_ZH_TECH = (
    "手机电量低于百分之二十时开启省电模式，可以明显延长使用时间。", "不要在多个网站使用同一个密码，最好开启两步验证。",
    "定期备份照片和文档，可以避免手机丢失后数据无法找回。", "路由器放在房间中央的高处，无线信号覆盖会更均匀。",
    "及时安装系统更新，可以修复已知的安全漏洞。", "睡前一小时减少看屏幕的时间，有助于提高睡眠质量。",
    "清理不常用的应用程序，能释放存储空间并让手机运行更流畅。", "公共场所的免费无线网络不够安全，尽量不要在上面输入密码。",
    "笔记本电脑长时间插着电源使用时，可以在设置中开启电池保护功能。", "给文件起一个清楚的名字并按日期归档，查找时会方便很多。",
)
_EN_WEATHER = ("sunny", "cloudy", "overcast", "light rain", "showers", "thunderstorms", "light snow", "foggy", "windy",
               "partly cloudy")
_EN_SPOTS = ("the old town", "the lakeside park", "the history museum", "the botanical garden", "the harbour walk",
             "the art gallery", "the city zoo", "the hilltop viewpoint", "the night market", "the castle ruins")
_EN_DISHES = {
    "tomato and egg stir-fry": ("two tomatoes", "three eggs", "a pinch of sugar", "spring onions"),
    "vegetable soup": ("two carrots", "one onion", "a potato", "a litre of stock"),
    "banana pancakes": ("two ripe bananas", "two eggs", "100 g of flour", "a little milk"),
    "fried rice": ("a bowl of cooked rice", "two eggs", "a handful of peas", "soy sauce"),
    "lemon chicken": ("four chicken thighs", "one lemon", "two cloves of garlic", "olive oil"),
    "mushroom risotto": ("300 g of rice", "200 g of mushrooms", "one onion", "grated cheese"),
}
_EN_TEAMS = ("Lions", "Dragons", "Eagles", "Dolphins", "Cheetahs", "Whales", "Rockets", "Comets", "Knights", "Wolves")
_EN_TECH = (
    "Turn on battery saver when your phone drops below twenty percent and it will last noticeably longer.",
    "Use a different password for every site and switch on two-step verification.",
    "Back up photos and documents regularly so a lost phone does not mean lost memories.",
    "Put the wireless router high up in the middle of the home for even coverage.",
    "Install system updates promptly; they fix known security holes.",
    "Avoid screens for an hour before bed to sleep better.",
    "Remove apps you never use to free space and keep the phone responsive.",
    "Public Wi-Fi is not secure, so avoid typing passwords on it.",
)


# Frames for general facts: everyday register, unlike the exam/practice frames of the domain corpora.
_ZH_FRAMES = ("{s}。", "{s}。", "你知道吗？{s}。", "{s}，这是很多人小时候就学过的知识。", "老师在课堂上讲过，{s}。",
              "据百科介绍，{s}。", "有趣的是，{s}。", "{s}，不少人第一次听说时都很惊讶。", "{p}在给孩子讲故事时提到，{s}。",
              "我们常说，{s}。", "{s}，这个知识点经常出现在智力问答节目里。")
_EN_FRAMES = ("{S}.", "{S}.", "Did you know that {s}?", "As every schoolchild learns, {s}.", "Fun fact: {s}.",
              "{p} reminded the class that {s}.", "According to the encyclopedia, {s}.", "Interestingly, {s}.")


def _say(rng: random.Random, fact: Fact, lang: str) -> str:
    s = render_fact(rng, fact, lang)
    if lang == "zh":
        return rng.choice(_ZH_FRAMES).format(s=s, p=lx.zh_person(rng))
    return rng.choice(_EN_FRAMES).format(s=s, S=s[:1].upper() + s[1:], p=lx.en_person(rng))


# ------------------------------------------------------------------------------------------------ zh documents
def _zh_weather(rng: random.Random, focus: list[Fact]) -> str:
    city = rng.choice(lx.ZH_CITIES)
    y, m, d = lx.zh_date(rng, (2015, 2024))
    out = [f"{city}{m}月{d}日天气预报"]
    for day in ("今天", "明天", "后天")[:rng.randint(2, 3)]:
        lo = rng.randint(-15, 28)
        hi = lo + rng.randint(3, 12)
        out.append(f"{day}{rng.choice(_ZH_WEATHER)}，气温{lo}到{hi}摄氏度，{rng.choice(_ZH_WIND)}{rng.randint(1, 6)}级，"
                   f"相对湿度{rng.randint(20, 95)}%。")
    out.append(rng.choice(("受冷空气影响，未来三天气温将逐步下降。", "未来几天以晴好天气为主，气温缓慢回升。",
                           "本周后期有一次明显降雨过程，请关注最新预报。", "近期昼夜温差较大，请注意预防感冒。")))
    out += rng.sample(_ZH_ADVICE, rng.randint(1, 2))
    out.append(f"生活指数：穿衣指数{rng.choice(('较冷', '舒适', '炎热', '冷'))}，洗车指数{rng.choice(('适宜', '较适宜', '不宜'))}，"
               f"运动指数{rng.choice(('适宜', '较适宜', '较不宜'))}。日出时间{rng.randint(5, 7)}:{rng.randint(0, 59):02d}，"
               f"日落时间{rng.randint(17, 19)}:{rng.randint(0, 59):02d}。")
    return "".join(out[:1]) + "\n" + "".join(out[1:])


def _zh_travel(rng: random.Random, focus: list[Fact]) -> str:
    city = rng.choice(lx.ZH_CITIES)
    spots = rng.sample(_ZH_SPOTS, rng.randint(2, 4))
    days = rng.randint(1, 5)
    s = [f"{city}{days}日游小记",
         f"这次和{rng.choice(('家人', '朋友', '同学', '同事'))}在{city}玩了{days}天。第一天去了{spots[0]}，"
         f"{rng.choice(('人不多，走走停停很惬意', '景色比照片上还要好看', '排队的人很多，建议早点出发', '里面有很多适合拍照的地方'))}。"]
    for sp in spots[1:]:
        s.append(f"之后去了{sp}，{rng.choice(('步行大约二十分钟', '坐公交三站就到', '打车十几分钟', '骑共享单车很方便'))}，"
                 f"{rng.choice(('门票价格不贵', '免费开放', '需要提前在网上预约', '周一闭馆'))}。")
    food = rng.sample(_ZH_FOODS, 2)
    s.append(f"当地的{food[0]}和{food[1]}一定要尝一尝，"
             f"{rng.choice(('味道很地道', '老字号的店铺在老街口', '价格实惠分量足', '晚上去人特别多'))}。")
    s += rng.sample(("建议穿一双舒服的鞋子。", "春秋两季来最合适。", "夏天记得带上防晒用品。", "旺季住宿要提前预订。",
                     f"从{rng.choice(lx.ZH_CITIES)}坐高铁过来大约{rng.randint(1, 8)}个小时。", "当地人都很热情，问路时会耐心指引。"),
                    rng.randint(1, 3))
    return s[0] + "\n" + "".join(s[1:])


def _zh_cooking(rng: random.Random, focus: list[Fact]) -> str:
    dish, ings = rng.choice(tuple(_ZH_DISHES.items()))
    steps = [f"准备{'、'.join(f'{n}{q}' for n, q in ings)}。",
             f"锅中倒入适量食用油，{rng.choice(('大火', '中火', '中小火'))}烧热后放入{ings[0][0]}，翻炒约{rng.randint(1, 5)}分钟。",
             f"加入{ings[1][0]}继续翻炒，{rng.choice(('加少许清水', '加一小碗开水', '沿锅边淋入少许料酒'))}，"
             f"{rng.choice(('盖上锅盖焖', '转小火炖', '继续翻炒'))}{rng.randint(2, 40)}分钟。",
             f"{rng.choice(('期间注意翻动，防止粘锅', '尝一下味道，根据口味调整咸淡', '汤汁变浓稠时改用大火'))}。",
             f"最后{rng.choice(('加盐调味', '撒上葱花', '收汁后出锅', '淋上香油'))}即可。"]
    if len(ings) > 2:
        steps.insert(2, f"放入{'、'.join(n for n, _ in ings[2:])}，{rng.choice(('炒出香味', '拌匀', '稍微煮一会儿'))}。")
    return f"家常{dish}的做法\n" + "".join(f"{i}. {t}" for i, t in enumerate(steps, 1)) + rng.choice((
        f"这道菜大约需要{rng.randint(10, 90)}分钟，适合{rng.randint(2, 5)}个人吃。", "小贴士：火候不要太大，以免粘锅。", ""))


def _zh_knowledge(rng: random.Random, focus: list[Fact]) -> str:
    title = rng.choice(("科普小知识", "你知道吗", "百科一分钟", "生活常识", "趣味问答", "地理小课堂", "历史文化小讲堂"))
    body = [_say(rng, f, "zh") for f in focus[:rng.randint(2, 4)]]
    body.insert(1, rng.choice(("这个结论是科学家们经过长期观察和测量得出的。", "这一点在日常生活中也能找到很多例子。",
                               "很多人对此并不熟悉，但它其实就在我们身边。", "这也是许多课外读物里经常提到的内容。")))
    body.append(rng.choice(("这些知识在中小学课本里都能找到。", "了解这些常识，能让我们更好地认识身边的世界。",
                            "下次和朋友聊天时，不妨把这些知识分享给他们。", "感兴趣的读者可以去图书馆查阅相关书籍。")))
    return title + "\n" + "".join(body)


def _zh_sports(rng: random.Random, focus: list[Fact]) -> str:
    a, b = rng.sample(_ZH_TEAMS, 2)
    ca, cb = rng.sample(lx.ZH_CITIES, 2)
    sport = rng.choice(("足球", "篮球"))
    if sport == "足球":
        sa, sb = rng.randint(0, 4), rng.randint(0, 4)
    else:
        sa, sb = rng.randint(78, 125), rng.randint(78, 125)
    star = lx.zh_person(rng)
    s = (f"{sport}联赛第{rng.randint(1, 30)}轮，{ca}{a}队主场迎战{cb}{b}队，最终比分{sa}比{sb}。"
         f"{star}全场{'打进' + str(rng.randint(1, 3)) + '球' if sport == '足球' else '得到' + str(rng.randint(15, 45)) + '分'}，"
         f"{rng.choice(('表现抢眼', '成为全场最佳', '帮助球队稳住局面', '赛后获得球迷的热烈掌声'))}。")
    s += rng.choice((f"上半场{ca}{a}队控球率达到{rng.randint(45, 70)}%，", f"比赛开始后双方展开激烈争夺，",
                     f"本场比赛吸引了{rng.randint(3000, 60000)}名观众到场观战，")) + rng.choice((
        "下半场客队一度追近比分，但未能完成逆转。", "主队凭借出色的防守守住了胜果。", "双方在最后时刻都错失了绝佳机会。",
        "主教练赛后表示对球员的拼搏精神非常满意。"))
    s += f"赛后，{ca}{a}队积{rng.randint(3, 70)}分，暂列积分榜第{rng.randint(1, 16)}位。"
    if rng.random() < 0.6 and focus:
        s += _say(rng, focus[0], "zh")
    return s


def _zh_tech(rng: random.Random, focus: list[Fact]) -> str:
    tips = rng.sample(_ZH_TECH, rng.randint(3, 5))
    return rng.choice(("数码生活小技巧", "手机使用小贴士", "电脑维护指南", "网络安全提醒")) + "\n" + "".join(
        f"{i}. {t}" for i, t in enumerate(tips, 1))


# ------------------------------------------------------------------------------------------------ en documents
def _en_weather(rng: random.Random, focus: list[Fact]) -> str:
    city = rng.choice(lx.EN_CITIES)
    lo = rng.randint(-10, 24)
    return (f"Weather for {city}, {lx.fmt_en_date(lx.zh_date(rng, (2015, 2024)))}: {rng.choice(_EN_WEATHER)} with a "
            f"high of {lo + rng.randint(3, 12)} and a low of {lo} degrees Celsius, winds of {rng.randint(5, 45)} km/h. "
            + " ".join(rng.sample(("Take an umbrella.", "A good day for a walk.", "Roads may be slippery.",
                                   "Expect a chilly evening.", "Sunscreen is a good idea.",
                                   f"Tomorrow turns {rng.choice(_EN_WEATHER)}.", f"Humidity around {rng.randint(20, 95)}%."),
                                  rng.randint(2, 3))))


def _en_travel(rng: random.Random, focus: list[Fact]) -> str:
    city = rng.choice(lx.EN_CITIES)
    a, b = rng.sample(_EN_SPOTS, 2)
    return (f"{rng.randint(1, 5)} days in {city}\nWe started at {a}, "
            f"{rng.choice(('which was quiet in the morning', 'which is free to enter', 'where we spent hours'))}, then took "
            f"{rng.choice(('a short tram ride', 'a twenty-minute walk', 'the ferry'))} to {b}. "
            + " ".join(rng.sample(("Book tickets online to skip the queue.", "The street food near the station is excellent.",
                                   "Spring and autumn are the best seasons to visit.", "Wear comfortable shoes.",
                                   "Locals were friendly and happy to give directions.", "Evenings by the water are lovely."),
                                  rng.randint(2, 3))))


def _en_cooking(rng: random.Random, focus: list[Fact]) -> str:
    dish, ings = rng.choice(tuple(_EN_DISHES.items()))
    return (f"How to make {dish}\nYou need {', '.join(ings[:-1])} and {ings[-1]}. Heat a little oil over "
            f"{rng.choice(('high', 'medium', 'low'))} heat, cook for {rng.randint(2, 15)} minutes, stir, then simmer for "
            f"another {rng.randint(2, 30)} minutes. Season to taste and serve {rng.choice(('hot', 'warm', 'straight away'))}.")


def _en_knowledge(rng: random.Random, focus: list[Fact]) -> str:
    return rng.choice(("Did you know?", "Science corner", "Quick facts", "Trivia of the day")) + "\n" + " ".join(
        _say(rng, f, "en") for f in focus[:rng.randint(2, 4)]) + " " + rng.choice((
            "You can find all of this in a school textbook.", "Share these with a friend next time you chat.",
            "Knowing the basics makes the world around us easier to understand.", ""))


def _en_sports(rng: random.Random, focus: list[Fact]) -> str:
    a, b = rng.sample(_EN_TEAMS, 2)
    ca, cb = rng.sample(lx.EN_CITIES, 2)
    s = (f"{ca} {a} beat {cb} {b} {rng.randint(1, 5)}-{rng.randint(0, 1)} on {lx.fmt_en_date(lx.zh_date(rng))}, with "
         f"{lx.en_person(rng)} scoring {rng.choice(('twice', 'the winner', 'a late goal', 'from the spot'))}.")
    s += " " + rng.choice(("The home side dominated possession in the first half.", "The visitors pushed hard late on.",
                           f"A crowd of {rng.randint(3000, 60000):,} watched the game.", "Both goalkeepers made key saves."))
    if rng.random() < 0.5 and focus:
        s += " " + _say(rng, focus[0], "en")
    return s


def _en_tech(rng: random.Random, focus: list[Fact]) -> str:
    return "Tech tips\n" + " ".join(rng.sample(_EN_TECH, rng.randint(2, 3)))


_ZH_KINDS = (("weather", _zh_weather, 2), ("travel", _zh_travel, 2), ("cooking", _zh_cooking, 2),
             ("knowledge", _zh_knowledge, 3), ("sports", _zh_sports, 2), ("technology", _zh_tech, 1))
_EN_KINDS = (("weather", _en_weather, 2), ("travel", _en_travel, 2), ("cooking", _en_cooking, 2),
             ("knowledge", _en_knowledge, 3), ("sports", _en_sports, 2), ("technology", _en_tech, 1))


def general_document(rng: random.Random, lang: str, focus: list[Fact]) -> tuple[str, str]:
    """One short general-domain document in `lang`; knowledge pieces state the first `focus` facts."""
    kinds = _ZH_KINDS if lang == "zh" else _EN_KINDS
    kind, gen, _ = rng.choices(kinds, weights=[k[2] for k in kinds])[0]
    return kind, gen(rng, focus)
