"""The demo organisation as data: one org, 4 programs, 15 teams, 38 projects, two clusters.

Budgets on each cluster leave about 17% of its GPUs unallocated at the top level. One team
(robotics/locomotion) deliberately promises its projects more than it holds on "main", so the
editor shows an over-commitment flag out of the box.
"""

from __future__ import annotations

ORG = "Lumen Lab"

# program -> team -> projects
TREE: dict[str, dict[str, list[str]]] = {
    "Language": {
        "Pretraining": ["Base 7B", "Base 70B", "Data Mixtures"],
        "Post-training": ["Instruction Tuning", "Preference Learning", "Safety"],
        "Evaluation": ["Benchmarks", "Red Teaming"],
        "Multilingual": ["Low-resource Languages", "Translation", "Speech Text"],
    },
    "Vision": {
        "Perception": ["Detection", "Segmentation", "Depth"],
        "Generation": ["Diffusion", "Image Editing", "Video Synthesis"],
        "Video": ["Action Recognition", "Long Video"],
        "Multimodal": ["Captioning", "Visual QA", "Document AI"],
    },
    "Robotics": {
        "Manipulation": ["Grasping", "Dexterous Hands", "Mobile Manipulation"],
        "Locomotion": ["Quadrupeds", "Humanoids"],
        "Sim2Real": ["World Models", "Domain Randomization"],
    },
    "Science": {
        "Climate": ["Weather Forecasting", "Ocean Models"],
        "Biology": ["Protein Design", "Genomics", "Cell Imaging"],
        "Materials": ["Crystal Structures", "Batteries"],
        "Chemistry": ["Molecule Generation", "Reaction Prediction"],
    },
}

# cluster slug -> (org budget, program budgets); teams and projects split by the weights below.
ORG_BUDGETS = {"main": 830, "h100": 53}
PROGRAM_SHARES = {"Language": 0.36, "Vision": 0.27, "Robotics": 0.15, "Science": 0.22}
# A program hands out this fraction of its budget to its teams; a team this fraction to its projects.
TEAM_FILL = 0.95
PROJECT_FILL = 0.9
# Over-commitment on purpose: this team's projects get more than the team.
OVERCOMMITTED = {("main", "Robotics", "Locomotion"): 1.25}
# The H100 pool funds only the heaviest teams.
H100_TEAMS = {"Pretraining", "Post-training", "Generation", "Multimodal", "Sim2Real", "Biology"}

CLUSTERS = [
    # slug, name, gpu type, nodes, GPUs per node, nodes per topology domain
    ("main", "main", "A100", 125, 8, 16),
    ("h100", "h100", "H100", 16, 4, 8),
]

PASSWORD = "demo"
PERSONAS = [
    # username, full name, what they are, flags
    ("manager", "Maria Okafor", "manages the Language program", {}),
    ("researcher", "Ravi Sato", "member of Language / Pretraining", {}),
    ("oncall", "Olga Brandt", "on-call engineer: staff (not superuser)", {"is_staff": True}),
    ("admin", "Ada Admin", "superuser (Django admin at /admin/)", {"is_staff": True, "is_superuser": True}),
]

FIRST_NAMES = [
    "amara",
    "bruno",
    "chen",
    "dana",
    "eli",
    "farah",
    "goran",
    "hana",
    "ines",
    "jonas",
    "kofi",
    "lena",
    "mateo",
    "nadia",
    "omar",
    "priya",
    "quinn",
    "rosa",
    "sven",
    "tariq",
    "uma",
    "vera",
    "wen",
    "ximena",
    "yusuf",
    "zoe",
]
LAST_NAMES = ["silva", "nguyen", "kowalski", "haddad", "mensah", "ito"]
RESEARCHER_COUNT = 150
