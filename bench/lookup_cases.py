"""The businesses, look-up tools and typed questions of ``bench lookups``.

Each :class:`Business` offers read-only tools (as an MCP server's ``readOnlyHint`` or an HTTP
tool's ``read_only`` say); each :class:`Ask` is a caller's words and the tool they need (None:
none; the model answers in words or says it does not know), with a word the tool's argument
must hold. :data:`TUNED` is what the router was tuned on: the museum line whose questions
:data:`agent.turn.routing.FLOOR` was first chosen on, then three businesses written after the
first run of the bench. :data:`HELD_OUT` was written before that first run, and of it only the
counts were read (five businesses, none of them a shipped persona); they showed half its
look-ups missed, so :data:`HELD_OUT_2` was written before the change that followed, its names
in the style of real MCP servers (``get_``, ``search_``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict


@dataclass(frozen=True)
class Ask:
    words: str
    tool: str | None
    argument: str = ""
    """A word (any case) one of the arguments' values must hold; "" for none."""
    before: tuple[str, str] = ()
    """A follow-up: the call's previous turn, (the caller's words, the agent's reply)."""


@dataclass(frozen=True)
class Business:
    name: str
    persona: str
    tools: tuple[Tool, ...]
    asks: tuple[Ask, ...]


def _params(*names: str, ints: tuple[str, ...] = ()) -> dict:
    props = {n: {"type": "integer" if n in ints else "string"} for n in names}
    return {"type": "object", "properties": props, "required": list(names)}


def _persona(what: str) -> str:
    return (f"You are the phone assistant of {what}. Answer in one or two short spoken "
            "sentences, without lists or symbols. Never make up prices, times or amounts: say "
            "you don't know.")


TUNED = (
    Business("museum", _persona("the city's visitor information line"), (
        Tool("museum_hours", "When the city museum opens and closes on a day of the week.",
             _params("day")),), (
        Ask("What time does the museum open on Sunday?", "museum_hours", "sunday"),
        Ask("When does the museum close on Monday?", "museum_hours", "monday"),
        Ask("Is the museum open on Saturday morning?", "museum_hours", "saturday"),
        Ask("Hi, what are the museum's hours tomorrow, Tuesday?", "museum_hours", "tuesday"),
        Ask("Can you recommend a restaurant?", None),
        Ask("Where can I park near the station?", None),
        Ask("Thanks, goodbye.", None),
        Ask("How much is a ticket for the museum?", None),
    )),
)

TUNED += (
    Business("couriers", _persona("Swift Parcels, a delivery company"), (
        Tool("track_parcel", "Where a parcel is and when it will be delivered, by its tracking "
                             "number.", _params("tracking_number")),
        Tool("depot_hours", "When a depot is open for collecting parcels, by the depot's town.",
             _params("town"))), (
        Ask("Where's my parcel? The tracking number is SP 4471 209.", "track_parcel", "4471"),
        Ask("When will parcel SP 88 120 arrive?", "track_parcel", "88"),
        Ask("Can I pick up a parcel at the Leeds depot today, what time does it open?",
            "depot_hours", "leeds"),
        Ask("Until when is the Bristol depot open?", "depot_hours", "bristol"),
        Ask("Do you deliver on Sundays?", None),
        Ask("How do I complain about a driver?", None),
        Ask("Hello?", None),
    )),
    Business("gym", _persona("Fit Factory gym"), (
        Tool("class_times", "The group classes at the gym on a day, with their times.",
             _params("day")),
        Tool("membership_status", "Whether a member's membership is active and until when, by "
                                  "member number.", _params("member_number"))), (
        Ask("What classes are on Thursday?", "class_times", "thursday"),
        Ask("Is there a spin class tomorrow morning?", "class_times", "tomorrow"),
        Ask("Is my membership still active? My number is 30517.", "membership_status", "30517"),
        Ask("When does membership 4412 run out?", "membership_status", "4412"),
        Ask("Do you have showers?", None),
        Ask("Can I freeze my membership while I'm abroad?", None),
        Ask("That's all, thanks.", None),
    )),
    Business("council", _persona("the borough council's waste line"), (
        Tool("bin_day", "Which day the bins are collected on a street, by street name.",
             _params("street")),), (
        Ask("When are the bins collected on Elm Road?", "bin_day", "elm"),
        Ask("What day is bin day for Castle Street?", "bin_day", "castle"),
        Ask("My recycling wasn't taken on Mill Lane, when do they come?", "bin_day", "mill"),
        Ask("Can I order a new green bin?", None),
        Ask("Where is the nearest tip?", None),
    )),
)

HELD_OUT = (
    Business("cinema", _persona("the Regent cinema"), (
        Tool("showtimes", "The films showing at the cinema on a date, with their start times.",
             _params("date")),
        Tool("seats_left", "How many seats are left for a film at a given start time.",
             _params("film", "time"))), (
        Ask("What's on tonight?", "showtimes", "tonight"),
        Ask("Which films are you showing on Friday?", "showtimes", "friday"),
        Ask("Are there still seats for Dune at seven thirty?", "seats_left", "dune"),
        Ask("Is the nine o'clock showing of Wicked sold out?", "seats_left", "wicked"),
        Ask("Do you have wheelchair access?", None),
        Ask("Can I bring my own snacks in?", None),
        Ask("Hello, is this the cinema?", None),
    )),
    Business("garage", _persona("Hill Street Garage, a car repair shop"), (
        Tool("part_in_stock", "Whether a car part is in stock, by the part and the car model.",
             _params("part", "car")),
        Tool("repair_status", "How far a customer's car repair has got, by the car's "
                              "registration number.", _params("registration"))), (
        Ask("Have you got brake pads for a Ford Focus?", "part_in_stock", "focus"),
        Ask("Do you stock a wiper blade for a Golf?", "part_in_stock", "golf"),
        Ask("Is my car ready yet? The registration is KX19 ABC.", "repair_status", "kx19"),
        Ask("How's the repair on AB12 CDE going?", "repair_status", "ab12"),
        Ask("Do you do MOT tests?", None),
        Ask("Can I pay by card?", None),
        Ask("Where are you based?", None),
    )),
    Business("hotel", _persona("the Harbour View hotel"), (
        Tool("rooms_free", "Whether rooms are free from an arrival date for a number of nights "
                           "and guests.", _params("arrival", "nights", "guests",
                                                  ints=("nights", "guests"))),), (
        Ask("Do you have a room free from the 12th of March for two nights, two of us?",
            "rooms_free", "march"),
        Ask("Any rooms available this Saturday for one night for one person?", "rooms_free",
            "saturday"),
        Ask("Is there availability on June 3rd for three nights for a family of four?",
            "rooms_free", "june"),
        Ask("Is breakfast included?", None),
        Ask("Do you allow dogs?", None),
        Ask("What's the wifi password?", None),
    )),
    Business("pharmacy", _persona("Green Cross pharmacy"), (
        Tool("prescription_ready", "Whether a prescription is ready to collect, by the "
                                   "patient's surname.", _params("surname")),
        Tool("opening_times", "The pharmacy's opening hours on a day.", _params("day"))), (
        Ask("Is my prescription ready? The name is Okafor.", "prescription_ready", "okafor"),
        Ask("Hi, can I check if the prescription for Lindqvist is ready to pick up?",
            "prescription_ready", "lindqvist"),
        Ask("Are you open on Sunday?", "opening_times", "sunday"),
        Ask("What time do you close on Wednesday?", "opening_times", "wednesday"),
        Ask("Can I get a flu jab without booking?", None),
        Ask("Do you sell hearing aid batteries?", None),
        Ask("Thank you, bye.", None),
    )),
    Business("buses", _persona("the Valley bus company"), (
        Tool("next_departures", "The next buses leaving a stop, by the stop's name.",
             _params("stop")),
        Tool("fare", "The single fare between two stops.", _params("origin", "destination"))), (
        Ask("When's the next bus from Market Square?", "next_departures", "market"),
        Ask("What buses leave the railway station soon?", "next_departures", "station"),
        Ask("How much is a ticket from Oakley to the hospital?", "fare", "oakley"),
        Ask("What's the fare from the university to the town centre?", "fare", "university"),
        Ask("Can I take a bicycle on the bus?", None),
        Ask("I left my umbrella on the bus yesterday.", None),
        Ask("Do you have a student discount?", None),
    )),
)

HELD_OUT_2 = (
    Business("vets", _persona("Meadow Vets, an animal clinic"), (
        Tool("get_appointment_slots", "Free appointment times with a vet on a date.",
             _params("date")),
        Tool("get_pet_record", "A pet's vaccinations and last visit, by the owner's surname "
                               "and the pet's name.", _params("surname", "pet"))), (
        Ask("Have you got any appointments free on Thursday?", "get_appointment_slots",
            "thursday"),
        Ask("Can Bella see a vet tomorrow afternoon, is there a slot?", "get_appointment_slots",
            "tomorrow"),
        Ask("When was Rex last vaccinated? Surname's Patel.", "get_pet_record", "rex"),
        Ask("Is Milo due his booster? The owner is Jones.", "get_pet_record", "milo"),
        Ask("Do you treat rabbits?", None),
        Ask("My dog ate chocolate, what should I do?", None),
        Ask("Good morning.", None),
    )),
    Business("airport", _persona("Northfield Airport's information desk"), (
        Tool("flight_status", "Whether a flight is on time, delayed or landed, by flight "
                              "number.", _params("flight")),
        Tool("parking_spaces", "How many spaces are free in a car park, by car park name.",
             _params("car_park"))), (
        Ask("Has flight BA 1432 landed yet?", "flight_status", "1432"),
        Ask("Is the Ryanair flight FR 207 delayed?", "flight_status", "207"),
        Ask("Are there spaces left in the long stay car park?", "parking_spaces", "long"),
        Ask("How full is car park B right now?", "parking_spaces", "b"),
        Ask("Can I take liquids through security?", None),
        Ask("Where do I find lost property?", None),
        Ask("Is there a pharmacy in the terminal?", None),
    )),
    Business("theatre", _persona("the Royal Theatre box office"), (
        Tool("search_performances", "The shows on at the theatre on a date, with their times.",
             _params("date")),
        Tool("search_seats", "The seats still free for a show on a date.",
             _params("show", "date"))), (
        Ask("What's on at the theatre next Saturday?", "search_performances", "saturday"),
        Ask("Which shows are playing on the 14th?", "search_performances", "14"),
        Ask("Are there any seats left for Hamlet on Friday?", "search_seats", "hamlet"),
        Ask("Can I still get two seats for Matilda tomorrow?", "search_seats", "matilda"),
        Ask("Is there a bar in the theatre?", None),
        Ask("How late does the show usually finish?", None),
        Ask("Hi there.", None),
    )),
    Business("rentals", _persona("Quick Wheels car rental"), (
        Tool("cars_available", "The cars free to rent from a branch for a pick-up date.",
             _params("branch", "date")),
        Tool("booking_lookup", "A customer's rental booking, by booking reference.",
             _params("reference"))), (
        Ask("What cars have you got at the city centre branch on Monday?", "cars_available",
            "monday"),
        Ask("Is anything available to pick up at the airport branch tomorrow?",
            "cars_available", "airport"),
        Ask("Can you check my booking, reference QW 55 81?", "booking_lookup", "55"),
        Ask("What time is my pick-up? My booking number is 90 17 X.", "booking_lookup", "90"),
        Ask("Do I need a credit card to rent?", None),
        Ask("Can my partner drive the car too?", None),
        Ask("Thanks, that's everything.", None),
    )),
    Business("power", _persona("the Eastern Power outage line"), (
        Tool("get_outage_status", "Known power cuts at a postcode and when power should be "
                                  "back.", _params("postcode")),
        Tool("get_bill_balance", "What a customer owes, by account number.",
             _params("account"))), (
        Ask("My power's gone off, is there a cut at NR2 4TJ?", "get_outage_status", "nr2"),
        Ask("When will the electricity be back on in IP1 3QR?", "get_outage_status", "ip1"),
        Ask("How much do I owe? Account 7781 2290.", "get_bill_balance", "7781"),
        Ask("What's the balance on account number 50 41 88?", "get_bill_balance", "50"),
        Ask("How do I read my meter?", None),
        Ask("Can I switch to a green tariff?", None),
        Ask("I smell gas near my house.", None),
    )),
)


def _after(words: str, reply: str) -> tuple[str, str]:
    return (words, reply)


FOLLOW_UPS = {
    # Tuned: the routing's use of the previous turn was chosen on these.
    "tuned": {
        "museum": (
            Ask("And on Monday?", "museum_hours", "monday", _after(
                "What time does the museum open on Sunday?",
                "The museum opens at 7:45 on Sunday.")),
            Ask("What about the weekend after?", "museum_hours", "", _after(
                "Is the museum open this Saturday?", "Yes, it is open on Saturday.")),
            Ask("Great, and is there a cafe nearby?", None, "", _after(
                "When does the museum close today?", "It closes at 19:15 today.")),
        ),
        "couriers": (
            Ask("And the Leeds one?", "depot_hours", "leeds", _after(
                "When is the Bristol depot open?", "The Bristol depot is open 8 to 6.")),
            Ask("Okay, can I change the delivery address then?", None, "", _after(
                "Where is parcel SP 4471 209?", "It is out for delivery today.")),
        ),
        "gym": (
            Ask("And on Friday?", "class_times", "friday", _after(
                "What classes are on Thursday?", "There is yoga at 6 and spin at 7.")),
            Ask("Do I need to bring a towel?", None, "", _after(
                "Is there a spin class tomorrow?", "Yes, at 7 in the morning.")),
        ),
        "council": (
            Ask("What about Oak Avenue?", "bin_day", "oak", _after(
                "When are the bins collected on Elm Road?", "On Elm Road it is Tuesdays.")),
        ),
    },
    # Held out: written with the tuned ones, not read while choosing anything.
    "held-out-2": {
        "vets": (
            Ask("And on Friday?", "get_appointment_slots", "friday", _after(
                "Have you got any appointments on Thursday?", "There is one at 3 pm.")),
            Ask("How much does a check-up cost?", None, "", _after(
                "Can Bella be seen tomorrow?", "Yes, there is a slot at 10.")),
        ),
        "airport": (
            Ask("And what about the short stay one?", "parking_spaces", "short", _after(
                "Are there spaces in the long stay car park?", "Yes, about 200.")),
            Ask("And EZY 88?", "flight_status", "88", _after(
                "Has flight BA 1432 landed?", "Yes, it landed ten minutes ago.")),
        ),
        "theatre": (
            Ask("And on Sunday?", "search_performances", "sunday", _after(
                "What's on next Saturday?", "Hamlet at 7:30.")),
            Ask("Is there parking near the theatre?", None, "", _after(
                "Any seats left for Hamlet on Friday?", "Yes, a few in the circle.")),
        ),
        "rentals": (
            Ask("What about the airport branch?", "cars_available", "airport", _after(
                "What cars have you got at the city centre branch on Monday?",
                "There are two small cars and a van.")),
        ),
        "power": (
            Ask("And at NR3 1AB?", "get_outage_status", "nr3", _after(
                "Is there a power cut at NR2 4TJ?", "Yes, power should be back by 6.")),
            Ask("Who do I call about a fallen cable?", None, "", _after(
                "When will the power be back in IP1 3QR?", "By 4 pm, we expect.")),
        ),
    },
}
"""Follow-ups: turns whose tool (or none) needs the call's turn before them."""
