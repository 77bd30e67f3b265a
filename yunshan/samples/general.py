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
# Ingredients as (name, unit, least, most): quantities are drawn, so ingredient lists vary between recipes.
_ZH_DISHES = {
    "番茄炒蛋": (("番茄", "个", 2, 4), ("鸡蛋", "个", 2, 5), ("葱花", "克", 5, 15), ("白糖", "克", 3, 10)),
    "红烧肉": (("五花肉", "克", 300, 800), ("冰糖", "克", 10, 30), ("生抽", "毫升", 10, 30), ("老抽", "毫升", 5, 15), ("姜片", "片", 2, 5)),
    "宫保鸡丁": (("鸡胸肉", "克", 200, 500), ("花生米", "克", 30, 80), ("干辣椒", "个", 4, 12), ("花椒", "克", 2, 6), ("黄瓜", "克", 50, 150)),
    "麻婆豆腐": (("嫩豆腐", "克", 300, 600), ("牛肉末", "克", 50, 150), ("豆瓣酱", "克", 15, 40), ("花椒粉", "克", 1, 4)),
    "清蒸鱼": (("鲈鱼", "克", 400, 900), ("葱丝", "克", 10, 30), ("姜丝", "克", 5, 20), ("蒸鱼豉油", "毫升", 15, 40)),
    "蛋炒饭": (("米饭", "克", 200, 500), ("鸡蛋", "个", 1, 4), ("火腿", "克", 30, 100), ("青豆", "克", 20, 80)),
    "凉拌黄瓜": (("黄瓜", "根", 1, 4), ("蒜末", "克", 5, 20), ("香醋", "毫升", 10, 30), ("香油", "毫升", 2, 8)),
    "土豆炖牛肉": (("牛腩", "克", 400, 900), ("土豆", "个", 1, 4), ("胡萝卜", "根", 1, 3), ("八角", "颗", 1, 4)),
    "可乐鸡翅": (("鸡翅中", "个", 6, 16), ("可乐", "毫升", 250, 500), ("生抽", "毫升", 10, 30), ("姜片", "片", 2, 5)),
    "酸辣汤": (("豆腐", "克", 100, 300), ("木耳", "克", 10, 40), ("鸡蛋", "个", 1, 3), ("陈醋", "毫升", 15, 45), ("白胡椒粉", "克", 1, 5)),
}
_ZH_TEAMS = ("雄狮", "猛龙", "飞鹰", "海豚", "猎豹", "蓝鲸", "火箭", "闪电", "勇士", "骑士", "山猫", "金牛")
# Technology tips are composed from a device, a number and an action, so the same sentence rarely recurs.
_ZH_DEVICES = ("手机", "平板电脑", "笔记本电脑", "台式电脑", "智能手表", "无线路由器", "智能电视", "蓝牙耳机", "电子阅读器")
_ZH_TECH = (
    "{d}电量低于百分之{n}时开启省电模式，大约能多用{m}分钟。", "{d}每隔{n}天重启一次，可以{b}。",
    "给{d}设置至少{n}位的密码，并开启两步验证，{b}。", "{d}的系统更新一般{n}分钟左右就能完成，建议在{t}安装。",
    "{d}的存储空间剩余不到{n}GB时容易变慢，清理{m}个不常用的应用就能{b}。", "连续使用{d}{n}个小时后，最好休息{m}分钟，让眼睛放松一下。",
    "把{d}放在离地面{n}厘米以上、远离微波炉的地方，{b}。", "给{d}备份照片和文档时，按{y}年、{y2}年这样的年份建文件夹，查找时会方便很多。",
    "{d}的充电器功率在{n}瓦左右就够用，夜里充电时{b}。", "在公共场所连接免费网络时，{d}上不要输入密码，{t}再处理重要的事情。",
)
_ZH_TECH_BENEFITS = ("让运行更流畅", "减少卡顿", "降低被盗号的风险", "让信号覆盖更均匀", "延长电池寿命", "避免数据丢失",
                     "节省不少流量", "让系统保持稳定")
_ZH_TECH_TIMES = ("晚上睡觉前", "周末空闲时", "连接家里的网络后", "电量充足的时候", "回到家以后")
_ZH_COMPANIONS = ("家人", "朋友", "同学", "同事", "父母", "表姐一家", "大学室友", "邻居一家")
_ZH_SPOT_NOTES = ("人不多，走走停停很惬意", "景色比照片上还要好看", "排队的人很多", "里面有很多适合拍照的地方",
                  "讲解员介绍得很详细", "小朋友们玩得特别开心", "傍晚的光线最好看", "里面有不少老建筑")
_ZH_TRANSPORT = ("步行大约{n}分钟", "坐公交{k}站就到", "打车{n}分钟左右", "骑共享单车{n}分钟", "坐地铁{k}站")
_ZH_TICKETS = ("门票{p}元", "免费开放", "需要提前{k}天在网上预约", "每周{w}闭馆", "学生票半价，只要{h}元")
_EN_WEATHER = ("sunny", "cloudy", "overcast", "light rain", "showers", "thunderstorms", "light snow", "foggy", "windy",
               "partly cloudy")
_EN_SPOTS = ("the old town", "the lakeside park", "the history museum", "the botanical garden", "the harbour walk",
             "the art gallery", "the city zoo", "the hilltop viewpoint", "the night market", "the castle ruins")
_EN_DISHES = {
    "tomato and egg stir-fry": (("tomatoes", "", 2, 4), ("eggs", "", 2, 5), ("sugar", " g of", 3, 10), ("spring onions", "", 1, 3)),
    "vegetable soup": (("carrots", "", 1, 4), ("onions", "", 1, 2), ("potatoes", "", 1, 3), ("stock", " ml of", 500, 1200)),
    "banana pancakes": (("ripe bananas", "", 1, 3), ("eggs", "", 1, 3), ("flour", " g of", 60, 200), ("milk", " ml of", 50, 200)),
    "fried rice": (("cooked rice", " g of", 200, 500), ("eggs", "", 1, 4), ("peas", " g of", 30, 100), ("soy sauce", " ml of", 10, 30)),
    "lemon chicken": (("chicken thighs", "", 2, 6), ("lemons", "", 1, 2), ("garlic cloves", "", 1, 4), ("olive oil", " ml of", 10, 40)),
    "mushroom risotto": (("rice", " g of", 200, 400), ("mushrooms", " g of", 100, 300), ("onions", "", 1, 2), ("cheese", " g of", 20, 80)),
}
_EN_TEAMS = ("Lions", "Dragons", "Eagles", "Dolphins", "Cheetahs", "Whales", "Rockets", "Comets", "Knights", "Wolves")
_EN_DEVICES = ("phone", "tablet", "laptop", "desktop computer", "smartwatch", "wireless router", "smart TV", "e-reader")
_EN_TECH = (
    "Turn on battery saver when your {d} drops below {n}% and it lasts about {m} minutes longer.",
    "Restarting your {d} every {n} days helps it {b}.",
    "Give your {d} a passcode of at least {n} digits and switch on two-step verification to {b}.",
    "A system update for a {d} usually takes about {n} minutes, so install it {t}.",
    "When a {d} has less than {n} GB free it slows down; removing {m} unused apps will {b}.",
    "After {n} hours in front of a {d}, rest your eyes for {m} minutes.",
    "Keep the {d} at least {n} cm off the floor and away from the microwave to {b}.",
)
_EN_TECH_BENEFITS = ("run more smoothly", "stay stable", "lower the risk of a hacked account", "save battery life",
                     "avoid losing data", "keep the signal even")
_EN_TECH_TIMES = ("before bed", "at the weekend", "once you are on home Wi-Fi", "while it is charging")


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
    out.append(rng.choice((f"受冷空气影响，未来{rng.randint(2, 5)}天气温将下降{rng.randint(3, 12)}摄氏度左右",
                           f"未来几天以晴好天气为主，最高气温将逐步回升到{rng.randint(10, 36)}摄氏度",
                           f"{rng.randint(3, 28)}日前后有一次明显降雨过程，累计雨量可达{rng.randint(10, 80)}毫米",
                           f"近期昼夜温差在{rng.randint(8, 15)}摄氏度左右"))
               + f"，{city}市气象台提醒：" + "".join(rng.sample(_ZH_ADVICE, rng.randint(1, 2))))
    out.append(f"生活指数：穿衣指数{rng.choice(('较冷', '舒适', '炎热', '冷'))}，洗车指数{rng.choice(('适宜', '较适宜', '不宜'))}，"
               f"运动指数{rng.choice(('适宜', '较适宜', '较不宜'))}，日出时间{rng.randint(5, 7)}:{rng.randint(0, 59):02d}，"
               f"日落时间{rng.randint(17, 19)}:{rng.randint(0, 59):02d}。")
    return "".join(out[:1]) + "\n" + "".join(out[1:])


def _zh_travel(rng: random.Random, focus: list[Fact]) -> str:
    city = rng.choice(lx.ZH_CITIES)
    spots = rng.sample(_ZH_SPOTS, rng.randint(2, 4))
    days = rng.randint(1, 5)
    y, mo, _ = lx.zh_date(rng, (2016, 2024))
    s = [f"{city}{days}日游小记",
         f"{y}年{mo}月，我和{rng.choice(_ZH_COMPANIONS)}在{city}玩了{days}天。第一天上午{rng.randint(7, 11)}点多就到了{spots[0]}，"
         f"{rng.choice(_ZH_SPOT_NOTES)}，我们在里面待了{rng.randint(1, 5)}个多小时。"]
    for sp in spots[1:]:
        s.append(f"之后去了{sp}，{rng.choice(_ZH_TRANSPORT).format(n=rng.randint(5, 40), k=rng.randint(2, 9))}，"
                 f"{rng.choice(_ZH_TICKETS).format(p=rng.randint(10, 180), k=rng.randint(1, 7), w=rng.choice('一二三四五'), h=rng.randint(5, 90))}。")
    food = rng.sample(_ZH_FOODS, 2)
    s.append(f"当地的{food[0]}和{food[1]}一定要尝一尝，一份大约{rng.randint(8, 60)}元，"
             f"{rng.choice(('味道很地道', '老字号的店铺在老街口', '分量很足', '晚上去人特别多'))}。")
    s += rng.sample((f"从{rng.choice(lx.ZH_CITIES)}坐高铁过来大约{rng.randint(1, 8)}个小时。",
                     f"我们住的酒店离市中心{rng.randint(1, 15)}公里，一晚{rng.randint(150, 900)}元。",
                     f"问路时，一位姓{rng.choice(lx.ZH_SURNAMES)}的{rng.choice(('大爷', '阿姨', '小伙子', '姑娘'))}耐心地给我们指了路。",
                     f"建议{rng.choice(('春秋两季', '五月前后', '十月中旬', '冬天'))}来，这次{days}天一共花了{rng.randint(8, 60) * 100}元左右。"),
                    rng.randint(1, 3))
    return s[0] + "\n" + "".join(s[1:])


def _zh_cooking(rng: random.Random, focus: list[Fact]) -> str:
    dish, ings = rng.choice(tuple(_ZH_DISHES.items()))
    steps = [f"准备{'、'.join(f'{n}{rng.randint(lo, hi)}{u}' for n, u, lo, hi in ings)}。",
             f"锅中倒入{rng.randint(10, 40)}毫升食用油，{rng.choice(('大火', '中火', '中小火'))}烧热后放入{ings[0][0]}，翻炒约{rng.randint(1, 5)}分钟。",
             f"加入{ings[1][0]}继续翻炒，{rng.choice(('加少许清水', '加一小碗开水', '沿锅边淋入少许料酒'))}，"
             f"{rng.choice(('盖上锅盖焖', '转小火炖', '继续翻炒'))}{rng.randint(2, 40)}分钟。",
             f"{rng.choice(('期间每隔', '中途每过', '炖的时候每隔'))}{rng.randint(2, 10)}分钟{rng.choice(('翻动一次，防止粘锅', '尝一下味道，调整咸淡', '看一看汤汁的多少'))}。",
             f"最后{rng.choice(('加盐调味', '撒上葱花', '收汁后出锅', '淋上香油'))}即可，"
             f"这道菜一共大约需要{rng.randint(10, 90)}分钟，适合{rng.randint(2, 5)}个人吃。"]
    if len(ings) > 2:
        steps.insert(2, f"放入{'、'.join(x[0] for x in ings[2:])}，{rng.choice(('炒出香味', '拌匀', '稍微煮一会儿'))}。")
    return f"家常{dish}的做法\n" + "".join(f"{i}. {t}" for i, t in enumerate(steps, 1))


def _zh_knowledge(rng: random.Random, focus: list[Fact]) -> str:
    title = rng.choice(("科普小知识", "你知道吗", "百科一分钟", "生活常识", "趣味问答", "地理小课堂", "历史文化小讲堂"))
    body = [_say(rng, f, "zh") for f in focus[:rng.randint(2, 4)]]
    body.append(rng.choice((
        f"{lx.zh_person(rng)}老师在{rng.randint(3, 9)}年级的课堂上也讲过这些内容。",
        f"{rng.choice(lx.ZH_CITIES)}科技馆第{rng.randint(1, 6)}展厅的展板上就介绍了这些知识。",
        f"读者{lx.zh_person(rng)}留言说，{rng.choice(('孩子', '自己', '家里的老人'))}看完后觉得很有收获。",
        f"本期内容由{lx.zh_person(rng)}整理，欢迎在评论区补充。")))
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
    s += rng.choice((f"上半场{ca}{a}队控球率达到{rng.randint(45, 70)}%，", f"比赛第{rng.randint(3, 40)}分钟双方就展开激烈争夺，",
                     f"本场比赛吸引了{rng.randint(3000, 60000)}名观众到场观战，")) + rng.choice((
        f"第{rng.randint(41, 90)}分钟客队一度追近比分，但未能完成逆转。", f"主队凭借{rng.randint(5, 30)}次成功防守守住了胜果。",
        f"双方在最后{rng.randint(2, 10)}分钟都错失了绝佳机会。", f"主教练{lx.zh_person(rng)}赛后表示对球员的拼搏精神非常满意。"))
    s += f"赛后，{ca}{a}队积{rng.randint(3, 70)}分，暂列积分榜第{rng.randint(1, 16)}位。"
    if rng.random() < 0.6 and focus:
        s += _say(rng, focus[0], "zh")
    return s


def _zh_tech(rng: random.Random, focus: list[Fact]) -> str:
    tips = []
    for tpl in rng.sample(_ZH_TECH, rng.randint(3, 5)):
        tips.append(tpl.format(d=rng.choice(_ZH_DEVICES), n=rng.randint(2, 30), m=rng.randint(10, 120),
                               b=rng.choice(_ZH_TECH_BENEFITS), t=rng.choice(_ZH_TECH_TIMES), y=(y := rng.randint(2015, 2023)), y2=y + 1))
    return rng.choice(("数码生活小技巧", "手机使用小贴士", "电脑维护指南", "网络安全提醒")) + "\n" + "".join(
        f"{i}. {t}" for i, t in enumerate(tips, 1))


# ------------------------------------------------------------------------------------------------ en documents
def _en_weather(rng: random.Random, focus: list[Fact]) -> str:
    city = rng.choice(lx.EN_CITIES)
    lo = rng.randint(-10, 24)
    return (f"Weather for {city}, {lx.fmt_en_date(lx.zh_date(rng, (2015, 2024)))}: {rng.choice(_EN_WEATHER)} with a "
            f"high of {lo + rng.randint(3, 12)} and a low of {lo} degrees Celsius, winds of {rng.randint(5, 45)} km/h. "
            f"Humidity will be around {rng.randint(20, 95)}% and sunset is at {rng.randint(17, 20)}:{rng.randint(0, 59):02d}. "
            + rng.choice((f"Tomorrow turns {rng.choice(_EN_WEATHER)} with highs near {rng.randint(-5, 35)} degrees.",
                          f"Rain totals of up to {rng.randint(5, 60)} mm are expected by {rng.choice(('Friday', 'Sunday', 'midweek'))}.",
                          f"Temperatures drop by about {rng.randint(3, 12)} degrees over the next {rng.randint(2, 5)} days."))
            + " " + rng.choice(("Take an umbrella.", "A good day for a walk.", "Roads may be slippery.",
                                "Sunscreen is a good idea.", "Expect a chilly evening.")))


def _en_travel(rng: random.Random, focus: list[Fact]) -> str:
    city = rng.choice(lx.EN_CITIES)
    a, b = rng.sample(_EN_SPOTS, 2)
    days = rng.randint(1, 5)
    return (f"{days} days in {city}\nWe started at {a} around {rng.randint(8, 11)} in the morning and "
            f"{rng.choice(('stayed for', 'spent', 'wandered for'))} {rng.randint(1, 4)} hours there, then took "
            f"{rng.choice(('a tram', 'a bus', 'the ferry', 'a taxi'))} for {rng.randint(5, 40)} minutes to {b}, where "
            f"tickets cost {rng.randint(3, 30)} euros. "
            + rng.choice((f"Dinner for two near the station came to about {rng.randint(20, 90)} euros.",
                          f"Our hotel was {rng.randint(1, 12)} km from the centre at {rng.randint(60, 250)} a night.",
                          f"A local named {rng.choice(lx.EN_FIRST)} showed us a shortcut through the old streets."))
            + " " + rng.choice((f"Book tickets online at least {rng.randint(1, 7)} days ahead to skip the queue.",
                                f"Wear comfortable shoes; we walked about {rng.randint(8, 25)} km a day.",
                                f"The whole trip cost about {rng.randint(3, 30) * 100} euros each.")))


def _en_cooking(rng: random.Random, focus: list[Fact]) -> str:
    dish, ings = rng.choice(tuple(_EN_DISHES.items()))
    parts = [f"{rng.randint(lo, hi)}{u} {name}" for name, u, lo, hi in ings]
    return (f"How to make {dish} for {rng.randint(2, 6)}\nYou need {', '.join(parts[:-1])} and {parts[-1]}. Heat "
            f"{rng.randint(1, 3)} tablespoons of oil over {rng.choice(('high', 'medium', 'low'))} heat, cook for "
            f"{rng.randint(2, 15)} minutes, stir, then simmer for another {rng.randint(2, 30)} minutes, checking every "
            f"{rng.randint(2, 8)} minutes. Season to taste and serve {rng.choice(('hot', 'warm', 'straight away'))}; "
            f"it takes about {rng.randint(15, 80)} minutes in all.")


def _en_knowledge(rng: random.Random, focus: list[Fact]) -> str:
    return rng.choice(("Did you know?", "Science corner", "Quick facts", "Trivia of the day")) + "\n" + " ".join(
        _say(rng, f, "en") for f in focus[:rng.randint(2, 4)]) + " " + rng.choice((
            f"Thanks to {lx.en_person(rng)} for suggesting today's topics.",
            f"{lx.en_person(rng)}'s class in {rng.choice(lx.EN_CITIES)} covered these in grade {rng.randint(3, 9)}.",
            f"Send us your own facts; {rng.randint(20, 400)} readers did last week."))


def _en_sports(rng: random.Random, focus: list[Fact]) -> str:
    a, b = rng.sample(_EN_TEAMS, 2)
    ca, cb = rng.sample(lx.EN_CITIES, 2)
    s = (f"{ca} {a} beat {cb} {b} {rng.randint(1, 5)}-{rng.randint(0, 1)} on {lx.fmt_en_date(lx.zh_date(rng))}, with "
         f"{lx.en_person(rng)} scoring {rng.choice(('twice', 'the winner', 'a late goal', 'from the spot'))}.")
    s += " " + rng.choice((f"The home side had {rng.randint(45, 72)}% of possession in the first half.",
                           f"The visitors pushed hard after the {rng.randint(50, 85)}th minute.",
                           f"A crowd of {rng.randint(3000, 60000):,} watched the game.",
                           f"Coach {lx.en_person(rng)} praised the defence afterwards."))
    if rng.random() < 0.5 and focus:
        s += " " + _say(rng, focus[0], "en")
    return s


def _en_tech(rng: random.Random, focus: list[Fact]) -> str:
    tips = [tpl.format(d=rng.choice(_EN_DEVICES), n=rng.randint(2, 30), m=rng.randint(5, 90), b=rng.choice(_EN_TECH_BENEFITS),
                       t=rng.choice(_EN_TECH_TIMES)) for tpl in rng.sample(_EN_TECH, rng.randint(2, 4))]
    return "Tech tips\n" + " ".join(tips)


_ZH_KINDS = (("weather", _zh_weather, 2), ("travel", _zh_travel, 2), ("cooking", _zh_cooking, 2),
             ("knowledge", _zh_knowledge, 3), ("sports", _zh_sports, 2), ("technology", _zh_tech, 1))
_EN_KINDS = (("weather", _en_weather, 2), ("travel", _en_travel, 2), ("cooking", _en_cooking, 2),
             ("knowledge", _en_knowledge, 3), ("sports", _en_sports, 2), ("technology", _en_tech, 1))


def general_document(rng: random.Random, lang: str, focus: list[Fact]) -> tuple[str, str]:
    """One short general-domain document in `lang`; knowledge pieces state the first `focus` facts."""
    kinds = _ZH_KINDS if lang == "zh" else _EN_KINDS
    kind, gen, _ = rng.choices(kinds, weights=[k[2] for k in kinds])[0]
    return kind, gen(rng, focus)
