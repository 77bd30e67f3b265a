"""`yunshan model merge`: an instruct model merged back into a continually pretrained one across an extended
vocabulary (`merge.py`, on mergekit), the new rows optionally refitted to the merged body on the continual
pretraining's own data. The refit trains, so merging sits above training (and models), not inside models.
"""
