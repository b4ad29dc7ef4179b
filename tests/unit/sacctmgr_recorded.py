"""What sacctmgr 22.05 printed on the local cluster (--noheader --parsable2, the formats of
slurm_associations.read_commands), for the accounts module's tests and plan's."""

from __future__ import annotations

# Once the local inventory is applied.
APPLIED = {
    "clusters": "local\n",
    "qos": (
        "normal|Normal QOS default|0||cluster|00:00:00|1.000000|||||||\n"
        "high|high|100|low|cluster|00:05:00|1.000000|||||||\n"
        "low|low|0||cluster|00:05:00|1.000000||gres/gpu=2||||||\n"
    ),
    "accounts": "default|default|default\nresearch|research|research\nroot|default root account|root\n"
                "team-a|team-a|research\nteam-b|team-b|research\n",
    "users": "alice|team-a\nroot|root\nsmoke|default\n",
    "assocs": (
        "root|||||normal|||||||\n"
        "root|root|||1||||||||\n"
        "default|||root|1||||||||\n"
        "default|smoke|||1||||||||\n"
        "research|||root|1||||||||\n"
        "team-a|||research|3|normal|high,low,normal|||||||\n"
        "team-a|alice|||1||||||||\n"
        "team-a|smoke|||1||||||||\n"
        "team-b|||research|1|||gres/gpu=2||||||\n"
        "team-b|smoke|||1||||||||\n"
    ),
}
# A new slurmdbd: only Slurm's own `normal` QoS.
EMPTY = {"clusters": "", "qos": "normal|Normal QOS default|0||cluster|00:00:00|1.000000|||||||\n", "accounts": "",
         "users": "", "assocs": ""}
